"""Writing outputs without ever leaving a half-written file, and one run at a time per output folder.

Every output goes to a temporary file beside its destination and is renamed over it when complete
(`os.replace` is atomic on one filesystem), so a kill during a write leaves the earlier file whole.
`out_lock` takes an exclusive lock on an output folder (or file) for the length of a run; a second run
into the same output fails at once with one clear line that names the holder's PID. The command line takes
it for every command's outputs (calibration/schema/out_locks.py); stages take it again for their Python callers.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rubric.errors import InputError

LOCK_NAME = ".role-rubric.lock"
# The mode the user's umask gives a new file (read once: os.umask can only be read by setting it).
_UMASK = os.umask(0o022)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path`; renamed over `path` when the block ends without an error, removed
    otherwise."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, FILE_MODE)  # mkstemp's 0600 would make outputs unreadable by the rest of the team
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as fh:  # the bytes reach the disk before the name points at them
            os.fsync(fh.fileno())
        os.chmod(tmp, FILE_MODE)  # a writer that recreates the file (safetensors' save_file) made it 0600 again
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """Call `write(tmp_path)`, then move the finished file to `path`."""
    path = Path(path)
    with atomic_path(path) as tmp:
        write(tmp)
    return path


def atomic_write_text(path: str | Path, text: str, *, encoding: str = "utf-8") -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding=encoding))


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_bytes(data))


def atomic_to_csv(frame: Any, path: str | Path, **kwargs: Any) -> Path:
    """`frame.to_csv(path, index=False, **kwargs)`, atomically."""
    kwargs.setdefault("index", False)
    return atomic_write(path, lambda tmp: frame.to_csv(tmp, **kwargs))


def ensure_out_dir(out: str | Path, *, key: str = "out") -> Path:
    """Create the output folder, or fail with one line when the path is a file or cannot be created."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError("the output path is a file, not a folder.", path=out, fix=f"set {key}= to a folder.")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"cannot create the output folder ({exc.strerror or exc}).",
            path=out,
            fix=f"set {key}= to a writable folder.",
        ) from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise InputError("the output folder is not writable.", path=out, fix=f"set {key}= to a writable folder.")
    return out


# Locks this process holds, by lock-file path -> depth: a command's stage may take the lock the command line
# already took for the whole run (calibration/schema/out_locks.py) without refusing itself.
_HELD: dict[tuple[int, str], int] = {}


def lock_path(out: str | Path, *, file: bool = False) -> Path:
    """The lock file of an output folder (`out/.role-rubric.lock`) or of an output file (beside it)."""
    out = Path(out)
    return out.parent / f".{out.name}{LOCK_NAME}" if file else out / LOCK_NAME


@contextlib.contextmanager
def out_lock(out: str | Path, *, key: str = "out", file: bool = False) -> Iterator[Path]:
    """Hold an exclusive lock on the output folder `out` (created if needed), or with `file=True` on the
    output file `out` (its folder created if needed), for the block.

    The lock is an advisory `flock` on a lock file, released by the kernel when the process ends however
    it ends, so a killed run never leaves a stale lock; the file holds the holder's PID so a refused run
    can name it, and is removed when the block ends. Re-entrant within one process."""
    out = Path(out)
    folder = out.parent if file else out
    if file and out.is_dir():
        raise InputError("the output path is a folder, not a file.", path=out, fix=f"set {key}= to a file path.")
    created = _missing_folders(folder)
    ensure_out_dir(folder, key=key)
    path = lock_path(out, file=file)
    held = (os.getpid(), os.path.realpath(path))
    if held in _HELD:
        _HELD[held] += 1
        try:
            yield out
        finally:
            _HELD[held] -= 1
        return
    try:
        fd = _acquire(path, out, key)
    except InputError:
        _remove_if_empty(created)
        raise
    _HELD[held] = 1
    try:
        yield out
    finally:
        del _HELD[held]
        with contextlib.suppress(OSError):
            os.unlink(path)  # while still locked: a run waiting on this inode sees it gone and retries
        os.close(fd)  # releases the flock
        _remove_if_empty(created)  # a run that wrote nothing (bad input) leaves no folder behind


def _missing_folders(folder: Path) -> list[Path]:
    """`folder` and its ancestors that do not exist yet, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_if_empty(folders: list[Path]) -> None:
    for folder in folders:
        try:
            folder.rmdir()  # only an empty folder; another run's files stop it here
        except OSError:
            return


def _acquire(path: Path, out: Path, key: str) -> int:
    """Open, lock and stamp the lock file; the file a run locked may have been removed by its earlier
    holder in between (see out_lock), so the lock counts only if `path` still names the locked file."""
    import fcntl

    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise InputError(
                f"cannot create the lock file ({exc.strerror or exc}).",
                path=path,
                fix=f"set {key}= to a writable folder.",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            raise InputError(
                f"another role-rubric run (PID {holder}) is writing to {'this file' if path.name != LOCK_NAME else 'this folder'}.",
                path=out,
                fix=f"wait for it to finish, or choose another {key}=.",
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return fd
        os.close(fd)


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MB blocks (weights and datasets can be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
