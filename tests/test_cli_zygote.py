"""The processes the suite forks from a pre-imported zygote (``tests/_support/cli_zygote.py``) are the ones
``python -m`` starts: the same status and output as a fresh interpreter's, the real watcher around a ``run`` (which
still catches a child that vanishes), a session of its own where asked, the working folder first on the path, and
a fresh interpreter wherever the environment read at start-up differs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import cli_zygote
import hostile_cases
import pytest
from clirun import cli_env
from hang_guard import hang_guard


def _fresh(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "distrepro.cli", *argv], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=hang_guard(240),
    )  # fmt: skip


def _forked(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    proc = cli_zygote.popen(argv, cwd, env, subprocess.PIPE, subprocess.PIPE)
    assert isinstance(proc, cli_zygote.Forked)
    out, err = proc.communicate(timeout=hang_guard(240))
    assert out is not None and err is not None
    return proc.wait(), out, err


@pytest.fixture
def inputs(tmp_path: Path, migrated_mlflow_db: Path) -> tuple[dict[str, Path], dict[str, str]]:
    paths = hostile_cases.write_inputs(tmp_path)
    shutil.copyfile(migrated_mlflow_db, tmp_path / "mlflow.db")
    return paths, cli_env(f"sqlite:///{tmp_path / 'mlflow.db'}")


def test_a_forked_command_ends_as_a_fresh_one(tmp_path: Path, inputs: tuple[dict[str, Path], dict[str, str]]) -> None:
    paths, env = inputs
    for argv in (
        ["run", str(paths["tiny"]), "--no-progress", "--set", "eval.times=1000000000"],  # refused by the config
        ["run", str(paths["tiny"]), "--bogus"],  # refused by argparse in the watcher
        ["report", "../../escaped", "--no-log"],  # not watched
    ):
        fresh = _fresh(argv, tmp_path, env)
        assert _forked(argv, tmp_path, env) == (fresh.returncode, fresh.stdout, fresh.stderr), argv
        assert fresh.returncode == 2 and fresh.stderr, fresh


def test_the_watcher_of_a_forked_run_catches_a_child_that_vanishes(
    tmp_path: Path, inputs: tuple[dict[str, Path], dict[str, str]]
) -> None:
    """``os._exit(0)`` in the in-process engine: the watcher (real, in the forked command) marks the runs FAILED."""
    paths, env = inputs
    argv = ["run", str(paths["tiny"]), "--no-progress", "--root", str(paths["root"]), "--jobs", "1"]
    rc, _, err = _forked([*argv, "--set", "method=vanishing"], tmp_path, env)
    assert rc == 1 and "ended without finishing (exit code 0 without Python's exit" in err, err
    assert "marked FAILED" in err, err


def test_a_forked_module_runs_as_python_m_in_its_folder_and_session(tmp_path: Path) -> None:
    (tmp_path / "where_am_i.py").write_text(
        "import os, sys\nprint(os.getsid(0) == os.getpid(), os.getcwd(), sys.path[0], sys.argv[1:], __name__)\n"
    )
    forking = cli_zygote.ForkingSubprocess(("where_am_i",))
    args = [sys.executable, "-m", "where_am_i", "x"]
    env = cli_env("sqlite:///unused.db")
    forked = forking.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, start_new_session=True)
    fresh = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, start_new_session=True, text=True)
    assert isinstance(forked, cli_zygote.Forked)
    said = [forked.communicate(timeout=hang_guard(60))[0], fresh.communicate(timeout=hang_guard(60))[0]]
    assert said[0] == said[1] == f"True {tmp_path} {tmp_path} ['x'] __main__\n", said
    # a module not named, or a call with more than Popen's usual arguments, is subprocess's own
    plain = forking.Popen([sys.executable, "-m", "json.tool", "--help"], stdout=subprocess.DEVNULL)
    assert isinstance(plain, subprocess.Popen) and plain.wait(timeout=hang_guard(60)) == 0


def test_a_forked_process_forks_its_ranks_from_its_zygote_unless_their_start_up_differs(tmp_path: Path) -> None:
    """The dist engine's launcher in a forked command: a rank with the command's start-up environment is forked by
    the same zygote (and runs as ``python -m``), one whose start-up environment differs starts fresh."""
    (tmp_path / "starts_ranks.py").write_text(
        "import os, subprocess, sys\n"
        "from distrepro.engine.multiprocess import launch\n"
        "rank = [sys.executable, '-m', 'distrepro.engine.multiprocess.worker', '--help']\n"
        "same = launch.subprocess.Popen(rank, env=dict(os.environ), stdout=subprocess.PIPE)\n"
        "print(type(same).__name__, same.wait(), 'usage:' in same.communicate()[0], flush=True)\n"
        "other = launch.subprocess.Popen(rank, env={**os.environ, 'OMP_NUM_THREADS': '7'}, stdout=subprocess.DEVNULL)\n"
        "other.kill()\n"
        "print(type(other).__name__, other.wait(), flush=True)\n"
    )
    proc = cli_zygote.popen_module("starts_ranks", [], tmp_path, cli_env("sqlite:///unused.db"), subprocess.PIPE,
                                   subprocess.PIPE)  # fmt: skip
    assert isinstance(proc, cli_zygote.Forked)
    out, err = proc.communicate(timeout=hang_guard(120))
    assert proc.wait() == 0 and out == "Forked 0 True\nPopen -9\n" and err == "", (out, err)


@pytest.mark.smoke
def test_only_what_is_read_later_may_differ_from_the_zygotes_environment() -> None:
    base = {"PATH": "/bin", "HOME": "/root", "MLFLOW_TRACKING_URI": "sqlite:///a.db", "DISTREPRO_ROOT": "/r"}
    same = cli_zygote._startup_part(base)
    assert same == cli_zygote._startup_part({**base, "MLFLOW_TRACKING_URI": "x", "PYTEST_CURRENT_TEST": "t"})
    assert same == cli_zygote._startup_part({**base, "_": "/usr/bin/distrepro", "SHLVL": "2", "PWD": "/w"})  # bash's
    for name, value in [("PYTHONHASHSEED", "7"), ("OMP_NUM_THREADS", "1"), ("HOME", "/tmp"), ("LC_ALL", "C"),
                        ("MLFLOW_LOGGING_LEVEL", "DEBUG")]:  # fmt: skip
        assert cli_zygote._startup_part({**base, name: value}) != same, name
