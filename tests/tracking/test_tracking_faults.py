"""Tracking-store faults through ``distrepro run``: one line on stderr, exit status 2, little work.

A dead server used to cost ~4 minutes of MLflow's HTTP retries and a 100-line traceback, an
unwritable SQLite path two minutes of engine retries. Each case runs the real command line (a
subprocess) under a hang guard (:data:`HANG_S`, many times a normal refusal, so that minutes of retries
end it and it fails on its exit status) and bounds its CPU time generously (:data:`CPU_S`; the store is
checked before torch or mlflow is imported). Wall time is never asserted: on a shared machine it measures
the neighbours. ``test_tracking_server.py`` covers a server that dies mid-campaign.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from clirun import Done, free_port, run_cli, write_config

from distrepro.errors import StoreUnavailable
from distrepro.tracking.mlflow_client import make_client

#: a refusal's wall time after which the command is ended as hung: retries took 2-4 minutes; a refusal takes
#: about 1 s on an idle machine and under 20 s at a load of 12 on 2 cores
HANG_S = 120.0
#: CPU seconds a refusal may take: about 0.5 s (Python, the config, the store check), 3 s where MLflow is asked
#: (``--resume``); 10x to spare for a loaded machine (as ``test_hostile_inputs.FAST_S``)
CPU_S = 30.0


def assert_one_line(done: Done, *names: str) -> str:
    assert done.rc == 2, done.err
    assert len(done.err_lines) == 1, done.err
    line = done.err_lines[0]
    assert line.startswith("distrepro: error: "), line
    for name in names:
        assert name in line, line
    assert done.cpu_s < CPU_S, f"took {done.cpu_s:.1f} s of CPU ({done.elapsed_s:.1f} s wall): {line}"
    return line


def refuse(args: list[str], uri: str, cwd: Path) -> Done:
    return run_cli(args, uri, cwd, timeout=HANG_S)


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make ``path`` read-only for this process's user; root writes through permission bits, so for
    root the file is made immutable (``chattr +i``) instead, or the test is skipped."""
    path.chmod(0o444)
    immutable = False
    try:
        if os.geteuid() == 0:
            chattr = shutil.which("chattr")
            if chattr is None or subprocess.run([chattr, "+i", str(path)], capture_output=True).returncode != 0:
                pytest.skip("running as root, where chmod does not stop writes, and chattr +i is not available")
            immutable = True
        yield
    finally:
        if immutable:
            subprocess.run([str(shutil.which("chattr")), "-i", str(path)], check=False)
        path.chmod(0o644)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path)


def test_unreachable_server_is_one_line(config: Path, tmp_path: Path) -> None:
    uri = f"http://127.0.0.1:{free_port()}"
    assert_one_line(refuse(["run", str(config), "--no-progress"], uri, tmp_path), uri, "not reachable")


def test_unwritable_sqlite_path_is_one_line(config: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    db = blocker / "mlflow.db"
    assert_one_line(refuse(["run", str(config), "--no-progress"], f"sqlite:///{db}", tmp_path), str(db))


def test_read_only_mlflow_db_is_one_line(config: Path, tmp_path: Path, migrated_mlflow_db: Path) -> None:
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir()
    shutil.copyfile(migrated_mlflow_db, db)
    with read_only(db):
        done = refuse(["run", str(config), "--no-progress"], f"sqlite:///{db}", tmp_path)
    assert_one_line(done, str(db), "read-only")
    assert not (db.parent / "mlartifacts").exists()  # refused before anything was written


def test_unknown_uri_scheme_is_one_line(config: Path, tmp_path: Path) -> None:
    assert_one_line(refuse(["run", str(config), "--no-progress"], "foo://somewhere", tmp_path), "foo://somewhere")


def test_resume_of_an_unknown_run_id_is_one_line(config: Path, tmp_path: Path, migrated_mlflow_db: Path) -> None:
    db = tmp_path / "mlflow.db"
    shutil.copyfile(migrated_mlflow_db, db)
    uri = f"sqlite:///{db}"
    done = refuse(["run", str(config), "--no-progress", "--resume", "deadbeef"], uri, tmp_path)
    assert_one_line(done, "deadbeef", uri, "no run")


@pytest.mark.timeout(HANG_S)  # MLflow's retries are bounded: minutes of them end the test as hung
def test_client_calls_fail_fast_once_the_server_is_gone() -> None:
    """Mid-campaign a dead server costs MLflow's bounded retries once; cleanup calls then fail at once: they
    never reach MLflow's client (whose every call would wait through the retries again)."""
    uri = f"http://127.0.0.1:{free_port()}"
    client = make_client(uri)
    with pytest.raises(StoreUnavailable, match="stopped answering") as first:
        client.get_run("0" * 32)
    assert uri in str(first.value) and "\n" not in str(first.value)
    reached: list[str] = []

    class Recorder:
        def __getattr__(self, name: str) -> object:
            return lambda *args, **kwargs: reached.append(name)

    client._client = Recorder()  # type: ignore[attr-defined]  # what a later call would send to MLflow
    with pytest.raises(StoreUnavailable, match="stopped answering"):
        client.set_terminated("0" * 32, "FAILED")
    assert reached == []


# ---------------------------------------------------------------------- a store that breaks mid-run

#: a method that breaks the store under it after its first step: deletes the SQLite file, or makes it read-only
#: (``chattr +i`` for root, whom permission bits do not stop)
_BREAK = """        import os, pathlib, shutil, subprocess
        store = pathlib.Path(os.environ['DISTREPRO_TEST_BREAK_STORE'])
        if int(ctx.train_state['step']) >= 1 and not os.environ.get('BROKEN'):
            os.environ['BROKEN'] = '1'
            store = pathlib.Path(os.environ['DISTREPRO_TEST_BREAK_STORE'])
            if os.environ['DISTREPRO_TEST_BREAK_HOW'] == 'delete':
                store.unlink()
            else:
                store.chmod(0o444)
                if os.geteuid() == 0 and shutil.which('chattr'):
                    subprocess.run(['chattr', '+i', str(store)], check=True)
"""


def _store_breaker(root: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "methods" / "ar_sgd" / "method.py").read_text(encoding="utf-8")
    head = "    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:\n"
    assert head in text
    text = text.replace(head, head + _BREAK).replace('name = "ar_sgd"', 'name = "store_breaker"')
    (root / "methods" / "store_breaker").mkdir(parents=True)
    (root / "methods" / "store_breaker" / "method.py").write_text(text, "utf-8")


@pytest.mark.parametrize(
    ("how", "debug", "fragments"),
    [
        ("delete", False, ("its file was deleted while this command ran", "went with the file", "or start again")),
        ("delete", True, ("was deleted while this command ran",)),
        ("read-only", False, ("its file became read-only", "what was logged before it is kept", "--resume")),
    ],
)
def test_a_store_that_breaks_mid_run_is_one_line_without_mlflows_log(
    tmp_path: Path,
    migrated_mlflow_db: Path,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    debug: bool,
    fragments: tuple[str, ...],
) -> None:
    """MLflow logs each failed store call with SQLAlchemy's traceback (about ninety lines) before it raises: held
    back, the user sees distrepro's one line, worded for the fault (a deleted file kept nothing); --debug shows
    MLflow's log too."""
    if how == "read-only" and os.geteuid() == 0 and shutil.which("chattr") is None:
        pytest.skip("running as root, where chmod does not stop writes, and chattr +i is not available")
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir()
    shutil.copyfile(migrated_mlflow_db, db)
    _store_breaker(tmp_path / "root")
    config = write_config(tmp_path, method="store_breaker", budget={"steps": 3})
    args = ["run", str(config), "--no-progress", "--root", str(tmp_path / "root"), *(["--debug"] if debug else [])]
    # named DISTREPRO_*: read as the method runs, never at start-up, so the command can be forked (cli_zygote)
    monkeypatch.setenv("DISTREPRO_TEST_BREAK_STORE", str(db))
    monkeypatch.setenv("DISTREPRO_TEST_BREAK_HOW", how)
    try:
        done = run_cli(args, f"sqlite:///{db}", tmp_path)
    finally:
        if db.exists() and shutil.which("chattr"):
            subprocess.run([str(shutil.which("chattr")), "-i", str(db)], check=False, capture_output=True)
    assert done.rc == 2, done.err
    assert len(done.error_lines) == 1, done.err
    for fragment in fragments:
        assert fragment in done.error_lines[0], done.error_lines[0]
    if debug:
        assert "sqlalchemy.exc.OperationalError" in done.err and "SQLAlchemy database error" in done.err, done.err
    else:
        others = [line for line in done.err_lines if line not in done.error_lines]
        assert all(line.startswith("[store-tiny") for line in others), done.err  # the seed's line, then ours
        assert "sqlalchemy" not in done.err.lower() and "Traceback" not in done.err, done.err


def test_a_store_locked_by_another_process_is_one_line(config: Path, tmp_path: Path, migrated_mlflow_db: Path) -> None:
    """An open write transaction elsewhere (a sqlite3 shell): MLflow waited on it for most of a minute, then raised
    with a traceback; the check waits a few seconds (``SQLITE_LOCK_WAIT_S``) and says who is in the way."""
    import sys

    db = tmp_path / "mlflow.db"
    shutil.copyfile(migrated_mlflow_db, db)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            f"con = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
            "con.execute('BEGIN IMMEDIATE')\nprint('locked', flush=True)\ntime.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        done = run_cli(["run", str(config), "--no-progress"], f"sqlite:///{db}", tmp_path)
    finally:
        holder.kill()
        holder.wait()
    # the command's heartbeat may speak while it waits on the lock (a loaded machine): progress, not part of the error
    said = [line for line in done.err_lines if not line.startswith("[alive ")]
    assert done.rc == 2 and said == done.error_lines and len(done.error_lines) == 1, done.err
    assert f"the store {db} is locked by another process" in done.error_lines[0], done.error_lines[0]


@pytest.mark.smoke  # in this process; each case above starts the command line (seconds of CPU: not smoke)
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_an_artifact_on_a_full_disk_is_a_store_fault_and_later_calls_fail_at_once(code: int) -> None:
    """A full disk (or quota) under the artifacts: StoreUnavailable (the campaign adds how to resume), and nothing
    more is tried there; any other OSError stays an artifact error that names its cause."""
    from distrepro.errors import TrackingError
    from distrepro.tracking.storeguard import GuardedClient

    calls: list[str] = []

    class Full:
        def log_text(self, *args: object) -> None:
            calls.append("log_text")
            raise OSError(code, os.strerror(code))

        def set_tag(self, *args: object) -> None:
            calls.append("set_tag")

    guarded = GuardedClient(Full(), "sqlite:///x.db")  # type: ignore[arg-type]
    with pytest.raises(StoreUnavailable, match=r"tracking store sqlite:///x.db: cannot write an artifact: its disk"):
        guarded.log_text("run", "text", "a.txt")
    with pytest.raises(StoreUnavailable):
        guarded.set_tag("run", "k", "v")
    assert calls == ["log_text"]

    class Denied(Full):
        def log_text(self, *args: object) -> None:
            raise PermissionError(errno.EACCES, "Permission denied")

    with pytest.raises(TrackingError, match=r"cannot write an artifact .*Permission denied"):
        GuardedClient(Denied(), "sqlite:///x.db").log_text("run", "text", "a.txt")  # type: ignore[arg-type]


@pytest.mark.smoke
def test_a_store_damaged_in_its_middle_is_named_as_damaged(tmp_path: Path) -> None:
    """A page damaged past what the probe reads surfaced mid-report as an unexpected ``MlflowException`` (SQLite's
    ``DatabaseError``, not an ``OperationalError``); it is a store fault naming the damage. A broken constraint is
    not (a param logged twice is the campaign lock's compare-and-set)."""
    from mlflow.exceptions import MlflowException

    from distrepro.tracking.storeguard import describe_fault

    db = tmp_path / "m.db"
    db.write_bytes(b"")  # there and writable: neither deleted nor read-only
    uri = f"sqlite:///{db}"
    damaged = MlflowException("(sqlite3.DatabaseError) database disk image is malformed\n[SQL: SELECT runs.run_uuid]")
    fault = describe_fault(damaged, uri)
    assert fault is not None and str(fault).startswith(f"tracking store {uri}: database disk image is malformed")
    assert "the file is damaged: restore it from a copy" in str(fault)
    assert describe_fault(MlflowException("(sqlite3.IntegrityError) UNIQUE constraint failed: params.key"), uri) is None
