"""SIGTERM is handled as Ctrl-C is (issues 25 and 27): runs KILLED, ranks ended, a resume hint, no orphans.

The end-to-end tests run ``distrepro run`` as the subprocess SLURM or ``timeout`` would signal, wait until its
child run is training, send SIGTERM to it alone (as ``timeout`` does), and then read the store and the
process table: the campaign and its child run are KILLED, the exit status is 143, the last line says how to
resume, and no process the command started is left.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from clirun import TINY, cli_env
from hang_guard import hang_guard

from distrepro.errors import Terminated, note_killed_run
from distrepro.orchestration.interrupts import (
    deferred_interrupts,
    exit_status,
    interrupted_line,
    termination_as_interrupt,
)

# ---------------------------------------------------------------------- the pieces


def test_sigterm_inside_the_block_raises_terminated_once_and_the_handler_comes_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated) as info, termination_as_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises in the main thread at the next bytecode
    assert isinstance(info.value, KeyboardInterrupt) and exit_status(info.value) == 143
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_second_sigterm_does_not_interrupt_the_cleanup_of_the_first() -> None:
    cleaned = False
    with pytest.raises(Terminated), termination_as_interrupt():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # e.g. a scheduler that repeats it
            time.sleep(0.2)
            cleaned = True
    assert cleaned


class _Thing:
    """Something with a weakref whose callback receives the signal."""


def test_a_sigterm_python_drops_in_a_weakref_callback_is_sent_again() -> None:
    """The garbage collector runs weakref callbacks anywhere; a handler that runs inside one raises into a frame
    whose exceptions Python prints and drops. Before, the SIGTERM was lost and later ones ignored (a CI run that
    outlived its SIGTERM by minutes); now it is sent again and raises where the callback interrupted."""
    seen: list[object] = []
    previous_hook, record = sys.unraisablehook, seen.append
    sys.unraisablehook = record  # what the block does not claim still reaches the hook in place before
    try:

        def callback(_ref: object) -> None:
            signal.raise_signal(signal.SIGTERM)  # runs the handler here, inside the callback

        with pytest.raises(Terminated), termination_as_interrupt():
            thing = _Thing()
            ref = weakref.ref(thing, callback)
            del thing
            assert ref() is None
            time.sleep(5)  # the signal sent again ends the sleep
        assert seen == [] and sys.unraisablehook is record  # claimed, not printed; the hook given back
        with termination_as_interrupt():
            weakref.finalize(_Thing(), lambda: 1 / 0)  # any other dropped exception goes to the previous hook
        assert [type(u.exc_value) for u in seen] == [ZeroDivisionError]
    finally:
        sys.unraisablehook = previous_hook


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """Python's own Ctrl-C handler, as a command starts with: a pytest-xdist worker ignores SIGINT instead."""
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, outer)


def test_a_ctrl_c_python_drops_in_a_weakref_callback_is_sent_again(ctrl_c_raises: None) -> None:
    """Python's own Ctrl-C handler raising inside a weakref callback: the ``KeyboardInterrupt`` is printed and
    dropped, so the first press was lost (a second one worked). Within the block it is sent again and raises
    where the callback interrupted, as a Ctrl-C (not a :class:`Terminated`), without the "Exception ignored"."""
    seen: list[object] = []
    previous_hook = sys.unraisablehook
    sys.unraisablehook = seen.append
    try:

        def callback(_ref: object) -> None:
            signal.raise_signal(signal.SIGINT)

        thing = _Thing()
        ref = weakref.ref(thing, callback)
        del thing  # outside the block: dropped, the program goes on (the bug)
        assert ref() is None and [type(u.exc_value) for u in seen] == [KeyboardInterrupt]
        with pytest.raises(KeyboardInterrupt) as info, termination_as_interrupt():
            thing = _Thing()
            ref = weakref.ref(thing, callback)
            del thing
            assert ref() is None
            time.sleep(5)  # the Ctrl-C sent again ends the sleep
        assert not isinstance(info.value, Terminated) and exit_status(info.value) == 130
        assert len(seen) == 1  # the one inside the block was claimed, not printed
    finally:
        sys.unraisablehook = previous_hook


def test_ctrl_c_in_a_deferred_block_takes_effect_when_the_block_ends(ctrl_c_raises: None) -> None:
    finished = False
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt) as info, deferred_interrupts():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # a handler would have raised by now
        os.kill(os.getpid(), signal.SIGINT)  # a second press is dropped
        time.sleep(0.2)
        finished = True
    assert finished and not isinstance(info.value, Terminated)
    assert signal.getsignal(signal.SIGINT) == before


def test_sigterm_in_a_deferred_block_is_handed_to_termination_as_interrupt() -> None:
    with pytest.raises(Terminated) as info, termination_as_interrupt():
        with deferred_interrupts():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.2)
        raise AssertionError("not reached: the SIGTERM takes effect as the block ends")
    assert exit_status(info.value) == 143


def test_a_deferred_signal_does_not_replace_an_interrupt_already_on_its_way() -> None:
    with pytest.raises(KeyboardInterrupt) as info, deferred_interrupts():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)
        raise KeyboardInterrupt("the first")
    assert info.value.args == ("the first",)


def test_the_hint_is_the_same_command_with_resume() -> None:
    exc = Terminated(signal.SIGTERM)
    note_killed_run(exc, "abc123")
    argv = ["run", "my config.yaml", "--set", "budget.steps=9", "--resume", "old", "--no-progress"]
    line = interrupted_line(exc, argv)
    assert line.startswith("distrepro: interrupted (terminated by SIGTERM); campaign run abc123 marked KILLED")
    assert line.endswith("distrepro run 'my config.yaml' --set budget.steps=9 --no-progress --resume abc123")
    assert interrupted_line(KeyboardInterrupt(), ["list"]) == "distrepro: interrupted (Ctrl-C)"
    assert exit_status(KeyboardInterrupt()) == 130


def test_the_hint_of_reproduce_resumes_its_reproduction_run() -> None:
    """``reproduce`` closes its arms' runs, then its umbrella run: the hint names the umbrella and the command that
    continues it (following the old hint, 'run CONFIG --resume <umbrella>', was refused: not a campaign run)."""
    exc = KeyboardInterrupt()
    note_killed_run(exc, "a" * 32)  # an arm's campaign run
    note_killed_run(exc, "b" * 32)  # the umbrella, closed last
    argv = ["reproduce", "cadp", "--jobs", "2", "--resume", "c" * 32, "--no-progress"]
    line = interrupted_line(exc, argv)
    assert line.startswith(f"distrepro: interrupted (Ctrl-C); reproduction run {'b' * 32} marked KILLED")
    assert line.endswith(f"continue it with: distrepro reproduce cadp --jobs 2 --no-progress --resume {'b' * 32}")
    bare = interrupted_line(exc, ["reproduce", "cadp", "--resume", "--no-progress"])  # --resume: the newest
    assert bare.endswith(f"distrepro reproduce cadp --no-progress --resume {'b' * 32}"), bare


# ---------------------------------------------------------------------- end to end, both engines


def _runs(db: Path) -> dict[str, tuple[str, str | None]]:
    """run id -> (status, parent run id), read without disturbing the writer."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0)
        try:
            rows = con.execute("SELECT run_uuid, status FROM runs").fetchall()
            parents = dict(con.execute("SELECT run_uuid, value FROM tags WHERE key = 'mlflow.parentRunId'").fetchall())
        finally:
            con.close()
    except sqlite3.OperationalError:  # locked, or the tables not there yet
        return {}
    return {run: (status, parents.get(run)) for run, status in rows}


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid``, from /proc (ranks are in sessions of their own, still its children)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _sigterm_a_training_run(tmp_path: Path, migrated_mlflow_db: Path, engine: str, workers: int) -> None:
    db = tmp_path / "mlflow.db"
    shutil.copyfile(migrated_mlflow_db, db)
    config = tmp_path / "long.yaml"
    long = {**TINY, "name": f"sigterm-{engine}", "budget": {"steps": 100_000}, "engine": engine}
    config.write_text(yaml.safe_dump({**long, "dist": {"timeout_s": 60}}), encoding="utf-8")
    argv = ["run", str(config), "--no-progress"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "distrepro.cli", *argv],
        cwd=tmp_path,
        env=cli_env(f"sqlite:///{db}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + hang_guard(240)
        while time.monotonic() < deadline and proc.poll() is None:
            training = any(parent for _, parent in _runs(db).values())
            if training and len(_descendants(proc.pid)) >= workers:
                break
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()
        time.sleep(2)  # into the training loop (the dist ranks: past their rendezvous)
        started = _descendants(proc.pid)
        assert len(started) >= workers, started
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=hang_guard(120))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in out + err, err
    runs = _runs(db)
    (parent,) = [run for run, (_, up) in runs.items() if up is None]
    assert {status for status, _ in runs.values()} == {"KILLED"} and len(runs) == 2, runs
    last = err.strip().splitlines()[-1]
    assert last.startswith("distrepro: interrupted (terminated by SIGTERM)"), err
    assert last.endswith(f"continue it with: distrepro {shlex.join([*argv, '--resume', parent])}"), last
    time.sleep(0.5)
    assert [pid for pid in started if _alive(pid)] == [], "processes left behind"


def test_sigterm_kills_the_runs_of_the_inprocess_engine(tmp_path: Path, migrated_mlflow_db: Path) -> None:
    _sigterm_a_training_run(tmp_path, migrated_mlflow_db, "inprocess", workers=0)


@pytest.mark.distributed
def test_sigterm_kills_the_runs_and_ranks_of_the_dist_engine(tmp_path: Path, migrated_mlflow_db: Path) -> None:
    _sigterm_a_training_run(tmp_path, migrated_mlflow_db, "dist", workers=4)


def test_the_hint_of_reproduce_leaves_out_what_its_resume_replays() -> None:
    """``reproduce --resume`` takes the seeds, arms and --set it started with from its run and refuses them given
    again: the hint printed after ``reproduce acid --seeds 100,101 ...`` must run as printed."""
    exc = Terminated(signal.SIGTERM)
    note_killed_run(exc, "f" * 32)
    argv = ["reproduce", "acid", "--seeds", "100,101", "--no-progress", "--set", "a.b=1", "--arms=x,y", "--jobs", "2"]
    line = interrupted_line(exc, argv)
    assert line.endswith(f"continue it with: distrepro reproduce acid --no-progress --jobs 2 --resume {'f' * 32}"), line
