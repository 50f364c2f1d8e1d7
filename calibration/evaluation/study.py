"""The Optuna study a search runs in: where it is stored (OUT/search.db, or a database several machines share
through search.storage), opening or resuming it for the same data and settings only, and cleaning up after
a killed worker (its RUNNING trials failed and retried, the current defaults queued again).

calibration/evaluation/search.py runs the trials in it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import random
import re
import time
from collections.abc import Callable

import numpy as np
import optuna

from calibration.data.dataset import Dataset
from calibration.model.settings import Settings
from rubric.errors import InputError

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def open_study(
    storage: str | None,
    name: str,
    seed: int,
    *,
    clean: bool = True,
    heartbeat: int | None = None,
    on_create: Callable[[optuna.Study], None] | None = None,
) -> optuna.Study:
    """Create or resume a study. With `clean`, trials left RUNNING by a killed process are marked failed
    (and so redone), and an enqueued trial (the current defaults) that never finished is queued again;
    only the process that starts a search cleans, never its workers. on_create: run on a study this call
    creates, by the one process that creates it (the storage refuses a second study of the name), so that
    searches starting a shared study at once queue its first trial once (checking for trials and then
    enqueueing is no lock: two searches both found none).

    heartbeat None: this search is the study's only user (OUT/search.db under the out-folder lock), so
    every RUNNING trial was left by a killed run. heartbeat N: the study is shared (search.storage, e.g. a
    PostgreSQL server several machines use): each running trial stamps a sign of life every N seconds,
    and only a trial silent for 2N seconds counts as killed; it is failed and its parameters are run
    again (once more at most twice), by whichever process notices it first."""
    if heartbeat is not None:  # processes sharing a study must not draw the same parameters from one seed
        seed = int.from_bytes(hashlib.sha256(f"{seed}:{worker_name()}".encode()).digest()[:4], "little")
    sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=8)
    check_driver(storage)
    try:  # the storage's engine connects as it is made: its errors too are one line
        opened = {"storage": storage_of(storage, heartbeat), "sampler": sampler, "pruner": pruner}
        try:
            study = optuna.create_study(study_name=name, direction="minimize", **opened)
            if on_create is not None:
                on_create(study)
        except optuna.exceptions.DuplicatedStudyError:
            study = optuna.load_study(study_name=name, **opened)
    except Exception as exc:  # the storage's driver raises its own types (sqlalchemy, psycopg...)
        if not (type(exc).__module__.startswith("sqlalchemy") or isinstance(exc, (ImportError, ValueError, OSError))):
            raise
        shown = re.sub(r"//[^@/]*@", "//***@", storage or "")  # never a password in the message
        detail = re.sub(r"//[^@/\s]*@", "//***@", str(exc).splitlines()[0])[:160]
        raise InputError(
            f"cannot open the search storage {shown} ({detail}).",
            fix="set search.storage to a database you can reach and write, or leave it null (OUT/search.db).",
        ) from None
    if clean and heartbeat is None:
        for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            study._storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL)
    if clean:
        if heartbeat is not None:
            stamp_dead_local_trials(study)
        with quiet_experimental():
            optuna.storages.fail_stale_trials(study)  # shared: only the silent ones (a no-op without heartbeat)
        requeue_interrupted(study)
    return study


STAMPED: set[tuple] = set()  # (trial id, start) this process stamped once for a dead worker (see below)


def stamp_dead_local_trials(study: optuna.Study) -> None:
    """A trial whose process was killed before its heartbeat thread wrote a first stamp has no heartbeat at
    all, and Optuna never counts such a trial stale: every search sharing the study would wait for it
    forever. Where its worker (host:pid) is a process of this machine that is gone, stamp one heartbeat
    for it (once per process), so that it goes stale after the grace period and is failed and retried like
    any other. A live worker's trial is never touched."""
    import socket

    from optuna.storages._heartbeat import BaseHeartbeat  # the storages that keep heartbeats (RDB)

    storage = study._storage
    if not isinstance(storage, BaseHeartbeat):  # no heartbeats kept: nothing goes stale, nothing to stamp
        return
    host = socket.gethostname()
    for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        name, _, pid = str(trial.user_attrs.get("worker", "")).rpartition(":")
        key = (trial._trial_id, trial.datetime_start)  # ids repeat across storages; their start does not
        if key in STAMPED or name != host or not pid.isdigit() or alive(int(pid)):
            continue
        with quiet_experimental():
            storage.record_heartbeat(trial._trial_id)
        STAMPED.add(key)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def worker_name() -> str:
    """host:pid of this process; recorded on each trial it runs (user attr `worker`)."""
    import socket

    return f"{socket.gethostname()}:{os.getpid()}"


# SQLAlchemy's default driver of each server scheme, and the extra that installs it.
DRIVERS = {
    "postgresql": ("psycopg", "postgres"),
    "postgresql+psycopg": ("psycopg", "postgres"),
    "postgresql+psycopg2": ("psycopg2", "postgres"),
}


def check_driver(url: str | None) -> None:
    """A storage URL whose database driver is not installed: one line naming the extra to install."""
    scheme = (url or "").split("://", 1)[0].lower()
    if scheme not in DRIVERS:
        return
    from rubric.extras import require

    _module, extra = DRIVERS[scheme]
    require(extra, by=f"search.storage {scheme}://")


def queued(study: optuna.Study) -> bool:
    """Whether the study holds an enqueued trial that no process has started yet."""
    return bool(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)))


def requeue_interrupted(study: optuna.Study) -> None:
    """Enqueue again every enqueued parameter set whose trials all failed (killed mid-trial): otherwise a
    kill during trial 0 loses the current defaults from the search for good."""
    states = optuna.trial.TrialState
    trials = study.get_trials(deepcopy=False)
    settled = [t.system_attrs.get("fixed_params") for t in trials if t.state != states.FAIL]
    for trial in trials:
        fixed = trial.system_attrs.get("fixed_params")
        if trial.state == states.FAIL and fixed is not None and fixed not in settled:
            study.enqueue_trial(fixed)
            settled.append(fixed)


def fingerprint(ds: Dataset, base: Settings, space: dict, *, folds: int, seed: int) -> str:
    """What a study's trials depend on: the dataset's numbers, the base settings, the space, the inner
    folds and the seed (not the trial count, timeout or workers, which only say how long to search)."""
    digest = hashlib.sha256()
    for array in (
        ds.probs,
        ds.present,
        ds.label_item,
        ds.label_judge,
        ds.answers,
        np.zeros(0) if ds.coverage is None else ds.coverage,
    ):
        digest.update(np.ascontiguousarray(array).tobytes())
    about = {
        "rubric": ds.rubric.fingerprint(),
        "target": ds.rubric.target,
        "judges": list(ds.judges),
        "items": [list(k) for k in ds.item_keys()],
        "settings": base.to_dict(),
        "space": space,
        "folds": folds,
        "seed": seed,
    }
    digest.update(json.dumps(about, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:32]


def bind_study(
    study: optuna.Study,
    print_: str,
    *,
    storage: str | None,
    name: str,
    seed: int,
    resume: bool,
    heartbeat: int | None = None,
    on_create: Callable[[optuna.Study], None] | None = None,
) -> optuna.Study:
    """The study for fingerprint `print_`: the stored one if it was made for the same data and settings;
    for other data or settings an error, or (resume=False) a new study in its place (on_create run on it,
    as open_study does)."""
    # trials before the fingerprint: the search that creates a study stamps it before queueing a trial, so
    # one starting beside it never sees that trial without the stamp (and takes it for another search's)
    trials = study.trials
    found = study.user_attrs.get("fingerprint")
    if found != print_ and (found is not None or trials):
        if resume:
            where = storage.removeprefix("sqlite:///") if storage and storage.startswith("sqlite:///") else storage
            raise InputError(
                f"study {name!r} ({len(trials)} trials) was run on another dataset or other settings "
                "(target, network/train settings, search space, inner folds or seed).",
                path=where,
                fix="pass search.resume=false to start a new study in its place (its trials are deleted), "
                "or choose another out= or search.study=.",
            )
        n_trials = len(trials)
        optuna.delete_study(study_name=name, storage=storage_of(storage))
        log.info(
            f"search: search.resume=false: deleted the earlier study {name!r} ({n_trials} trials) and started a new one"
        )
        study = open_study(storage, name, seed, heartbeat=heartbeat, on_create=on_create)
    study.set_user_attr("fingerprint", print_)
    return study


SCHEMA_ATTEMPTS = 6  # tries at making the storage's tables while other processes make them too


def storage_of(url: str | None, heartbeat: int | None = None):
    """An RDB storage (SQLite waits for a lock instead of failing when several processes share it), with
    trial heartbeats for a shared study (see open_study).

    Searches started together on a new database all create Optuna's tables at once; PostgreSQL lets one
    win and refuses the others (a duplicate key in pg_type, a table that already exists). Such a refusal
    is retried after a short random pause, by when the tables exist and are only read; any other error
    (a server that cannot be reached, a refused login) is raised at once."""
    if url is None:
        return None
    jitter = random.Random(os.getpid())  # the pause only spreads the processes apart; it changes no result
    for attempt in range(1, SCHEMA_ATTEMPTS):
        try:
            return _rdb_storage(url, heartbeat)
        except Exception as exc:
            if not schema_race(exc):
                raise
            time.sleep(jitter.uniform(0.05, 0.25) * attempt)
    return _rdb_storage(url, heartbeat)


def schema_race(exc: BaseException) -> bool:
    """Whether `exc` is another process having created (or creating) the storage's tables first: an
    integrity error, an "already exists" or a deadlock between the two from the database, never a
    connection or login failure."""
    import sqlalchemy.exc

    if not isinstance(exc, sqlalchemy.exc.DBAPIError):
        return False
    text = str(exc.orig if exc.orig is not None else exc).lower()
    if isinstance(exc, sqlalchemy.exc.OperationalError):  # a refused connection or login, save a DDL deadlock
        return "deadlock detected" in text
    return isinstance(exc, sqlalchemy.exc.IntegrityError) or "already exists" in text or "duplicate key" in text


def _rdb_storage(url: str, heartbeat: int | None):
    engine = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    if heartbeat is None:
        return optuna.storages.RDBStorage(url, engine_kwargs=engine)
    # Optuna 4.9 renamed the callback; both put the failed trial's number in system attr "failed_trial".
    retry = (
        getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) or optuna.storages.RetryFailedTrialCallback
    )
    with quiet_experimental():
        return optuna.storages.RDBStorage(
            url,
            engine_kwargs=engine,
            heartbeat_interval=heartbeat,
            grace_period=2 * heartbeat,
            heartbeat_stale_trial_callback=retry(max_retry=2),
        )


@contextlib.contextmanager
def quiet_experimental():
    """Optuna marks heartbeats experimental and warns on every use; a search prints its own lines only."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        yield
