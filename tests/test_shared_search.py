"""Two `role-rubric search` processes share one study on a real PostgreSQL server (and on a SQLite file
beside it): the trials split between them, the requested total is reached, one of them is killed mid-trial
and started again, every trial is recorded once and none is lost, and both report the same best. Processes
started at the same moment on a new database all open the storage (the schema race retried) and join the study.

The server is PostgreSQL's own: initdb into a temporary folder, pg_ctl on a free loopback port (as the
`postgres` user when the tests run as root), stopped afterwards. Skipped, with the reason, where that
cannot start (no server binaries, no psycopg driver)."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.calibration.conftest import make_native_dataset

ROOT = Path(__file__).resolve().parents[1]
TRIALS = 8


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(candidates[-1]) if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerUnavailable(Exception):
    """Why a PostgreSQL server cannot be started here."""


@contextlib.contextmanager
def postgres_server(tmp: Path):
    """A throwaway PostgreSQL server; yields its SQLAlchemy URL, or raises ServerUnavailable(why not)."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        raise ServerUnavailable("PostgreSQL is not installed (no initdb/pg_ctl; apt-get install postgresql)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise ServerUnavailable("the psycopg driver is not installed (pip install 'role-rubric[postgres]')") from None
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            raise ServerUnavailable("running as root and there is no 'postgres' user to run the server as") from None
        as_user = ["runuser", "-u", "postgres", "--"]
        os.chown(tmp, owner.pw_uid, owner.pw_gid)
    data, port = tmp / "data", _free_port()

    def run(*cmd: str) -> None:
        done = subprocess.run([*as_user, *cmd], capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise ServerUnavailable(f"{Path(cmd[0]).name} failed: {(done.stderr or done.stdout).strip()[-300:]}")

    run(initdb, "-D", str(data), "-A", "trust", "-U", "rr", "-E", "UTF8", "--no-sync")
    run(
        pg_ctl,
        "-D",
        str(data),
        "-l",
        str(tmp / "server.log"),
        "-w",
        "-t",
        "60",
        "-o",
        f"-p {port} -h 127.0.0.1 -k {tmp} -c fsync=off",
        "start",
    )
    try:
        yield f"postgresql://rr@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_native_dataset(tmp_path_factory.mktemp("shared") / "data", n_conversations=16)


def _search(data: Path, out: Path, storage: str) -> subprocess.Popen:
    narrow = [
        f"~search.space.{k}"
        for k in (
            "hidden1",
            "hidden2",
            "batch_size",
            "finetune_lr",
            "pretrain_steps",
            "finetune_steps",
            "weight_decay",
            "ensemble",
        )
    ]
    args = [
        sys.executable,
        "-m",
        "calibration.cli",
        "search",
        f"data={data}",
        f"out={out}",
        f"search.storage={storage}",
        "search.study=shared",
        f"search.trials={TRIALS}",
        "search.workers=1",
        "search.inner_folds=2",
        "search.heartbeat=1",
        "train.ensemble=1",
        "train.pretrain_steps=150",
        "train.finetune_steps=200",
        *narrow,
    ]
    return subprocess.Popen(
        args,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
    )


def _study(storage: str):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.load_study(study_name="shared", storage=storage)


def _pid(trial) -> int | None:
    worker = trial.user_attrs.get("worker")
    return int(worker.rsplit(":", 1)[1]) if worker else None


def _retried_late(finished) -> bool:
    """Whether the killed trial's retry started after the other finished trials had reached the total."""
    retry = [t for t in finished if "failed_trial" in t.system_attrs]
    others = sorted(t.datetime_complete for t in finished if "failed_trial" not in t.system_attrs)
    return bool(retry) and len(others) >= TRIALS and retry[0].datetime_start > others[TRIALS - 1]


def _two_searches_one_killed(data: Path, tmp: Path, storage: str) -> None:
    import optuna

    states = optuna.trial.TrialState
    a, b = _search(data, tmp / "a", storage), _search(data, tmp / "b", storage)
    try:
        killed = None
        deadline = time.time() + 300
        while killed is None and time.time() < deadline and a.poll() is None:
            with contextlib.suppress(Exception):  # the study may not exist yet
                trials = _study(storage).get_trials(deepcopy=False)
                finished = [t for t in trials if t.state in (states.COMPLETE, states.PRUNED)]
                # a trial of a's that has sampled all its parameters: killed before that, its retry would
                # sample afresh and there would be nothing to compare
                mine = [
                    t
                    for t in trials
                    if t.state == states.RUNNING
                    and _pid(t) == a.pid
                    and finished
                    and set(t.params) == set(finished[0].params)
                ]
                if finished and mine:
                    a.send_signal(signal.SIGKILL)
                    killed = mine[0].number
            time.sleep(0.1)
        assert killed is not None, "process a never ran a trial to kill"
        a.wait()
        again = _search(data, tmp / "a", storage)  # resumed: the same command again
        out_again, out_b = again.communicate(timeout=600)[0], b.communicate(timeout=600)[0]
        assert again.returncode == 0, out_again
        assert b.returncode == 0, out_b
    finally:
        for proc in (a, b):
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    trials = _study(storage).trials
    by_number = {t.number: t for t in trials}
    finished = [t for t in trials if t.state in (states.COMPLETE, states.PRUNED)]
    # the requested total is reached (a process that found it reached stops; at most one trial over per
    # other process) and no trial is left running or queued. A retry queued only after the total was reached
    # runs all the same, and a second search that saw it queued at that moment may run one fresh trial more.
    assert TRIALS <= len(finished) <= TRIALS + 1 + 2 * _retried_late(finished), [(t.number, t.state) for t in trials]
    assert not [t for t in trials if t.state in (states.RUNNING, states.WAITING)]
    # the killed trial is recorded once, as failed, and its parameters were run again to the end
    assert by_number[killed].state == states.FAIL
    assert [t.number for t in trials if t.state == states.FAIL] == [killed]
    retried = [t for t in finished if t.system_attrs.get("failed_trial") == killed]
    assert len(retried) == 1 and retried[0].params == by_number[killed].params
    # the current settings were queued once, not once per process
    assert sum(1 for t in trials if "fixed_params" in t.system_attrs and "failed_trial" not in t.system_attrs) == 1, [
        (t.number, t.state, _pid(t), sorted(t.system_attrs)) for t in trials
    ]
    # the trials split between the processes: a ran the killed trial, b finished some. (The resumed a may find
    # nothing left: on a busy machine b can finish the rest, the retry included, while it starts.)
    assert _pid(by_number[killed]) == a.pid and b.pid in {_pid(t) for t in finished}
    # both report the same best
    reports = [json.loads((tmp / name / "search.json").read_text()) for name in ("a", "b")]
    assert reports[0]["best_trial_nll"] == reports[1]["best_trial_nll"] == _study(storage).best_value
    assert reports[0]["best"] == reports[1]["best"] and reports[0]["finished_trials"] == reports[1]["finished_trials"]


@pytest.mark.slow  # two searches, a kill and a restart
def test_two_searches_share_a_study_on_postgresql(data, tmp_path):
    import tempfile

    server_dir = Path(tempfile.mkdtemp(prefix="role-rubric-pg-"))  # outside pytest's 0700 root-owned tmp
    try:
        with postgres_server(server_dir) as url:
            _two_searches_one_killed(data, tmp_path, url)
    except ServerUnavailable as exc:
        print(f"PostgreSQL test skipped: {exc}", file=sys.stderr)
        pytest.skip(str(exc))
    finally:
        shutil.rmtree(server_dir, ignore_errors=True)


@pytest.mark.slow
def test_two_searches_share_a_study_in_a_sqlite_file(data, tmp_path):
    _two_searches_one_killed(data, tmp_path, f"sqlite:///{tmp_path / 'shared.db'}")


def test_a_missing_driver_is_one_line_naming_the_extra(data, tmp_path, monkeypatch, capsys):
    from calibration.cli import main

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as on an install without the extra
    code = main(["search", f"data={data}", f"out={tmp_path / 's'}", "search.storage=postgresql://u@127.0.0.1:1/db"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "needs the optional extra [postgres] (psycopg)" in err and "pip install 'role-rubric[postgres]'" in err


def test_a_storage_password_is_never_printed_or_written():
    from calibration.evaluation.search import shown_storage

    assert (
        shown_storage("postgresql://bob:s3cret@db.example:5432/studies")
        == "postgresql://bob:***@db.example:5432/studies"
    )
    assert shown_storage("postgresql://bob@db.example/studies") == "postgresql://bob@db.example/studies"


# Started from one Python that has already imported everything, then all released together: the searches
# reach the storage within milliseconds of each other, as workers a scheduler starts at once do.
_AT_ONCE = """
import os, sys, time
from calibration.cli import main
go = sys.argv[1]
while not os.path.exists(go):
    time.sleep(0.005)
sys.exit(main(sys.argv[2:]))
"""


def _searches_at_once(data: Path, tmp: Path, storage: str, n: int, trials: int) -> list[tuple[int, str]]:
    go = tmp / "go"
    procs = []
    for i in range(n):
        args = [
            f"data={data}",
            f"out={tmp / f'w{i}'}",
            f"search.storage={storage}",
            "search.study=together",
            f"search.trials={trials}",
            "search.workers=1",
            "search.inner_folds=2",
            "search.heartbeat=2",
            "train.ensemble=1",
            "train.pretrain_steps=20",
            "train.finetune_steps=20",
        ]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", _AT_ONCE, str(go), "search", *args],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
            )
        )
    try:
        time.sleep(8)  # every process has imported torch and optuna and waits for the signal
        go.touch()
        return [(p.wait(timeout=120), p.stdout.read()) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.slow  # a server and three searches (about 30 s)
def test_searches_started_together_on_a_new_postgresql_database_all_join_the_study(data, tmp_path):
    """Three searches released at the same moment on an empty database: all create Optuna's tables at once
    (the losers of that race used to exit 2, "cannot open the search storage ... UniqueViolation"); all
    must exit 0, sharing one study that holds every trial asked for, the defaults queued once."""
    import tempfile

    import optuna

    server_dir = Path(tempfile.mkdtemp(prefix="role-rubric-pg-"))
    try:
        with postgres_server(server_dir) as url:
            results = _searches_at_once(data, tmp_path, url, n=3, trials=4)
            for code, output in results:
                assert code == 0, output
                assert "cannot open the search storage" not in output
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            assert optuna.get_all_study_names(storage=url) == ["together"]
            trials = optuna.load_study(study_name="together", storage=url).trials
            states = optuna.trial.TrialState
            assert sum(t.state in (states.COMPLETE, states.PRUNED) for t in trials) >= 4
            assert not [t for t in trials if t.state in (states.RUNNING, states.WAITING, states.FAIL)]
            assert sum("fixed_params" in t.system_attrs for t in trials) == 1
    except ServerUnavailable as exc:
        pytest.skip(str(exc))
    finally:
        shutil.rmtree(server_dir, ignore_errors=True)


_OPEN_AT_ONCE = """
import os, sys, time
from calibration.evaluation.study import open_study
go = sys.argv[1]
while not os.path.exists(go):
    time.sleep(0.002)
study = open_study(sys.argv[2], "together", 0, heartbeat=2, on_create=lambda s: s.set_user_attr("creator", os.getpid()))
print(study.user_attrs["creator"])
"""


@pytest.mark.slow  # a server and four processes (about 15 s)
def test_storages_opened_at_the_same_moment_on_a_new_database_all_open_the_one_study(tmp_path):
    """The race itself, without a search's data loading to spread the processes apart: four processes open
    the storage within milliseconds on an empty database (before the retry, all but one failed with a
    duplicate key in pg_type, every time). All open it, and all find the study the one creator made."""
    import tempfile

    server_dir = Path(tempfile.mkdtemp(prefix="role-rubric-pg-"))
    try:
        with postgres_server(server_dir) as url:
            procs = [
                subprocess.Popen(
                    [sys.executable, "-c", _OPEN_AT_ONCE, str(tmp_path / "go"), url],
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                )
                for _ in range(4)
            ]
            time.sleep(6)  # every process has imported optuna and waits
            (tmp_path / "go").touch()
            results = [p.communicate(timeout=60) for p in procs]
            for proc, (_out, err) in zip(procs, results, strict=True):
                assert proc.returncode == 0, err[-2000:]
            creators = {out.strip() for out, _ in results}
            assert len(creators) == 1 and creators <= {str(p.pid) for p in procs}, results
    except ServerUnavailable as exc:
        pytest.skip(str(exc))
    finally:
        shutil.rmtree(server_dir, ignore_errors=True)


def _db_error(kind: str, message: str):
    import sqlalchemy.exc

    return getattr(sqlalchemy.exc, kind)("CREATE TABLE studies (...)", {}, Exception(message))


@pytest.mark.parametrize(
    ("kind", "message", "race"),
    [
        ("IntegrityError", 'duplicate key value violates unique constraint "pg_type_typname_nsp_index"', True),
        ("ProgrammingError", 'relation "studies" already exists', True),
        ("OperationalError", "deadlock detected", True),
        ("OperationalError", 'connection to server at "127.0.0.1", port 1 failed: Connection refused', False),
        ("OperationalError", 'password authentication failed for user "rr"', False),
        ("ProgrammingError", "permission denied for schema public", False),
    ],
)
def test_only_a_schema_race_is_retried(kind, message, race, monkeypatch):
    """A race with another process creating the tables is retried until the tables exist; a connection,
    login or permission error is raised at the first try (reported as an unreachable storage)."""
    from calibration.evaluation import study

    calls = []

    def fails_twice(url, heartbeat):
        calls.append(url)
        if len(calls) <= 2:
            raise _db_error(kind, message)
        return "storage"

    monkeypatch.setattr(study, "_rdb_storage", fails_twice)
    monkeypatch.setattr(study.time, "sleep", lambda s: None)
    if race:
        assert study.storage_of("postgresql://rr@db/x") == "storage" and len(calls) == 3
    else:
        with pytest.raises(Exception, match=message.split()[0]):
            study.storage_of("postgresql://rr@db/x")
        assert len(calls) == 1


def test_a_schema_race_that_never_settles_is_raised_after_a_few_tries(monkeypatch):
    from calibration.evaluation import study

    calls = []

    def always(url, heartbeat):
        calls.append(url)
        raise _db_error("IntegrityError", "duplicate key value violates unique constraint")

    monkeypatch.setattr(study, "_rdb_storage", always)
    monkeypatch.setattr(study.time, "sleep", lambda s: None)
    with pytest.raises(Exception, match="duplicate key"):
        study.storage_of("postgresql://rr@db/x")
    assert len(calls) == study.SCHEMA_ATTEMPTS


def test_a_closed_postgresql_port_is_one_unreachable_storage_error_at_once():
    pytest.importorskip("psycopg")
    from calibration.evaluation.study import open_study
    from rubric.errors import InputError

    started = time.monotonic()
    with pytest.raises(InputError, match=r"cannot open the search storage postgresql://\*\*\*@127\.0\.0\.1:1/x"):
        open_study("postgresql://rr:secret@127.0.0.1:1/x", "s", 0, heartbeat=2)
    assert time.monotonic() - started < 5  # not retried as a schema race
