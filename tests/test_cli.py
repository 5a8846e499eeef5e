"""``distrepro`` on the command line: list, run, help (bad input is in ``test_config_errors.py``).

The tests that start a fresh interpreter (a few seconds of CPU each) are left out of ``smoke``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hang_guard import hang_guard

from distrepro.cli import main
from distrepro.hardware.profiles import list_profiles
from distrepro.tracking.mlflow_client import make_client

TINY: dict[str, Any] = {
    "name": "cli-tiny",
    "method": "ar_sgd",
    "dataset": {"name": "synthetic", "params": {"train_size": 256, "test_size": 64, "image_size": 8}},
    "model": {"name": "small_cnn", "params": {"hidden": 16}},
    "batch_size": 8,
    "budget": {"steps": 2},
    "eval": {"times": 2},
    "torch_threads": 1,
}


@pytest.fixture
def tracking(mlflow_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's private store (``mlflow_uri``, set in the environment); the cwd is a scratch folder."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return mlflow_uri


@pytest.mark.smoke
def test_list_prints_methods_datasets_and_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out, _ = capsys.readouterr()
    methods = out.split("methods:")[1].split("datasets:")[0]
    for name, mode in (("ar_sgd", "lockstep"), ("local_sgd", "lockstep"), ("gossip", "asynchronous")):
        assert re.search(rf"^\s+{name}\s+baseline\s+{mode}\s", methods, re.M), methods
    assert "synthetic" in out.split("datasets:")[1]
    profiles = out.split("hardware profiles:")[1]
    for name in list_profiles():
        assert re.search(rf"^\s+{re.escape(name)}\s+\d+ workers", profiles, re.M), name
    assert re.search(r"homogeneous-4\s+4 workers", profiles)
    assert "INVALID" not in out
    assert "plugins that failed to load" not in out


@pytest.mark.smoke
def test_list_shows_plugins_that_failed_to_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    (root / "methods" / "cli_broken").mkdir(parents=True)
    (root / "methods" / "cli_broken" / "method.py").write_text("1 / 0\n", encoding="utf-8")
    monkeypatch.setenv("DISTREPRO_ROOT", str(root))
    assert main(["list"]) == 0
    out, _ = capsys.readouterr()
    assert "plugins that failed to load:" in out
    assert re.search(r"method cli_broken \(.*cli_broken\): ZeroDivisionError", out), out


@pytest.mark.smoke
def test_run_tiny_config_succeeds_and_prints_run_ids(
    tracking: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY), encoding="utf-8")
    assert main(["run", str(path), "--no-progress", "--set", "budget.steps=3", "--seeds", "0,1"]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    parent = re.search(r"campaign run ([0-9a-f]{32})", out)
    assert parent is not None, out
    # the id is said when the campaign starts, before any seed trains, so a killed run can be resumed
    started = f"campaign run {parent.group(1)} started (continue it with --resume {parent.group(1)})"
    assert out.splitlines()[0] == started, out
    assert f"tracking {tracking}" in out
    children = re.findall(r"seed (\d): val_acc [0-9.]+ .* run ([0-9a-f]{32})", out)
    assert [seed for seed, _ in children] == ["0", "1"]

    client = make_client(tracking)
    assert client.get_run(parent.group(1)).info.status == "FINISHED"
    for seed, run_id in children:
        run = client.get_run(run_id)
        assert run.info.status == "FINISHED"
        assert run.data.tags["mlflow.parentRunId"] == parent.group(1)
        assert run.data.tags["distrepro.seed"] == seed
        assert run.data.params["budget.steps"] == "3"  # the --set override reached the run
        assert run.data.metrics["final/steps"] == 3.0
    assert not (Path.cwd() / "mlflow.db").exists()  # the store is the one in MLFLOW_TRACKING_URI


def test_output_a_terminal_cannot_encode_degrades_instead_of_failing(tmp_path: Path) -> None:
    """``LC_ALL=POSIX`` or ``PYTHONIOENCODING=ascii``: ``list`` printed A²CiD²'s name and ended with an unexpected
    UnicodeEncodeError (exit 1); the character becomes ``?`` and the command succeeds."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "-m", "distrepro.cli", "list"], capture_output=True, env=env, cwd=tmp_path,
                          timeout=hang_guard(300), check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode("ascii", "replace")[-500:]
    assert b"UnicodeEncodeError" not in proc.stderr
    assert b"A?CiD?" in proc.stdout and all(byte < 128 for byte in proc.stdout)


@pytest.mark.smoke
@pytest.mark.parametrize("command", ["run", "list"])
def test_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out, _ = capsys.readouterr()
    assert out.startswith(f"usage: distrepro {command}")
    if command == "run":
        for option in ("--set", "--seeds", "--engine", "--no-progress", "config"):
            assert option in out


@pytest.mark.smoke
def test_top_level_help_and_missing_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: distrepro")
    assert re.search(r"^\s+run\s+train a config", out, re.M) and re.search(r"^\s+list\s+list the papers", out, re.M)
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2  # argparse: a command is required
    assert "required" in capsys.readouterr().err


@pytest.mark.smoke
@pytest.mark.parametrize(
    ("argv", "whole"),
    [
        (["reproduce", "chao", "--seed", "0"], "--seed"),
        (["run", "x.yaml", "--seed", "1"], "--seed"),
        (["list", "--deb"], "--deb"),
    ],
)
def test_a_flag_is_never_read_from_its_abbreviation(
    argv: list[str], whole: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--seed 0`` once ran as ``--seeds 0`` (argparse completes a unique prefix) and put an exploratory seed into a
    registered report: every parser refuses a flag it does not know by its whole name."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert f"unrecognized arguments: {whole}" in capsys.readouterr().err


def _python(code: str, tmp_path: Path, *flags: str) -> str:
    """stderr of ``code`` in a fresh interpreter with this checkout first on the path."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=hang_guard(300), check=True)  # fmt: skip
    return done.stderr


def test_no_exit_hook_imports_tabulate(tmp_path: Path) -> None:
    code = "import torch._dynamo.utils\nfrom distrepro.cli.main import drop_exit_hooks\ndrop_exit_hooks()"
    assert "tabulate" not in _python(code, tmp_path, "-X", "importtime")
    assert "tabulate" in _python("import torch._dynamo.utils", tmp_path, "-X", "importtime")  # the hook it drops


def test_a_new_store_prints_no_info_lines(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'new.db'}"
    code = f"from distrepro.tracking.mlflow_client import make_client\nmake_client({uri!r}).search_experiments()"
    err = _python(code, tmp_path)
    assert "INFO" not in err and (tmp_path / "new.db").is_file()


@pytest.mark.smoke
def test_a_deleted_working_folder_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shell left in a folder that was deleted: torch's MKL then ended ``run`` with "oneMKL FATAL ERROR"."""
    import os

    def gone() -> str:
        raise FileNotFoundError(2, "No such file or directory")

    monkeypatch.setattr(os, "getcwd", gone)
    assert main(["run", "tiny.yaml"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "distrepro: error: the working folder was deleted: cd to a folder that exists"
    )
