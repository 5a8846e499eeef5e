"""How the ``distrepro`` command ends (distrepro/cli/console.py): exit handlers run and output flushed, the
interpreter's tear-down skipped, the normal exit where another thread still runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hang_guard import hang_guard

REPO = Path(__file__).resolve().parents[2]

#: a script that leaves output in stdout's buffer, an exit handler, an object whose finaliser only the
#: interpreter's tear-down runs, and (with an argument) a non-daemon thread still working
SCRIPT = """
import atexit, sys, threading, time
from distrepro.cli.console import exit_now

class Finalised:
    def __del__(self):
        sys.__stderr__.write("torn down\\n")

keep = Finalised()
atexit.register(lambda: sys.stderr.write("handler ran\\n"))
sys.stdout.write("buffered output\\n")  # a pipe: block-buffered, still in the buffer at exit
if len(sys.argv) > 1:
    threading.Thread(target=lambda: (time.sleep(0.3), sys.stderr.write("thread done\\n"))).start()
exit_now(3)
"""


def _run(*args: str, stdout: int = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTHONUNBUFFERED", None)  # stdout a block-buffered pipe, as under most callers
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, *args], stdout=stdout, stderr=subprocess.PIPE, text=True, env=env,
        timeout=hang_guard(120),
    )  # fmt: skip


@pytest.mark.smoke
def test_the_command_ends_after_its_handlers_and_flush_without_the_tear_down() -> None:
    done = _run()
    assert done.returncode == 3
    assert done.stdout == "buffered output\n"
    assert done.stderr == "handler ran\n"  # no "torn down": the interpreter did not finalise its objects


@pytest.mark.smoke
def test_a_thread_still_running_gets_the_normal_exit() -> None:
    done = _run("with a thread")
    assert done.returncode == 3
    assert done.stdout == "buffered output\n"
    assert done.stderr.splitlines()[:2] == ["thread done", "handler ran"]  # waited for, as Python's exit does
    assert "torn down" in done.stderr


def test_a_reader_that_left_is_not_an_error() -> None:
    """``distrepro list | head``: the output cannot be flushed, nobody is there to read it; the status stays."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = _run(stdout=write)
    finally:
        os.close(write)
    assert done.returncode == 3 and done.stderr == "handler ran\n"


@pytest.mark.smoke
@pytest.mark.parametrize("hook", ["setprofile", "settrace"])
def test_a_profiled_or_traced_command_gets_the_normal_exit(hook: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m cProfile -m distrepro.cli``, ``coverage run``, pdb: they write their results at the normal exit."""
    from distrepro.cli import console

    def must_not_end(code: int) -> None:
        raise AssertionError(f"os._exit({code}) under a profiler")

    monkeypatch.setattr(console.os, "_exit", must_not_end)
    monkeypatch.setattr(console.atexit, "_run_exitfuncs", lambda: None)  # never pytest's own, even if it fails
    monkeypatch.setattr(console.sys, hook.replace("set", "get"), lambda: print)
    with pytest.raises(SystemExit) as info:
        console.exit_now(3)
    assert info.value.code == 3
