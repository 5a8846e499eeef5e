"""A plugin's crash names the plugin's file, line and function, and the ``--debug`` hint, on both engines.

The test plugin ``tests/_support/plugins/methods/faulty`` raises ``RuntimeError("injected failure")`` in its
``train_step`` with ``mode: raise``; the line shown must be that ``raise``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from distrepro.cli import main
from distrepro.errors import WorkerFailure
from distrepro.plugins import registry
from distrepro.plugins.crash_site import crash_site, plugin_frame

REPO = Path(__file__).resolve().parents[2]
FAULTY = REPO / "tests" / "_support" / "plugins" / "methods" / "faulty" / "method.py"
RAISE_LINE = next(i for i, line in enumerate(FAULTY.read_text().splitlines(), 1) if "injected failure" in line)


@pytest.fixture
def faulty_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user root holding the faulty plugin (linked), added to the shipped ones."""
    root = tmp_path / "root"
    (root / "methods").mkdir(parents=True)
    os.symlink(FAULTY.parent, root / "methods" / "faulty")
    monkeypatch.setenv("DISTREPRO_PATH", str(root))
    return root


def _raise_from(module_code: str, root: Path, name: str) -> BaseException:
    folder = root / "methods" / name
    folder.mkdir(parents=True)
    (folder / "method.py").write_text(module_code, encoding="utf-8")
    helper = registry.plugin_module(name, "method", root)
    try:
        helper.boom()
    except Exception as exc:
        return exc
    raise AssertionError("the plugin did not raise")


BOOM = """
from distrepro import api


def _inner():
    raise ValueError("deep")


def boom():
    sorted([1, 2], key=lambda v: _inner())  # through a builtin and back into the plugin


class Method(api.Method):
    def train_step(self, ctx, batch):
        ctx.forward_backward(batch)
"""


def test_the_innermost_plugin_frame_is_named_from_the_methods_folder(tmp_path: Path) -> None:
    exc = _raise_from(BOOM, tmp_path / "r", "tmp_boom")
    site = plugin_frame(exc)
    assert site is not None
    path, line, function = site
    assert path == "methods/tmp_boom/method.py"
    deep = next(i for i, text in enumerate(BOOM.splitlines(), 1) if '"deep"' in text)
    assert (function, line) == ("_inner", deep)  # the innermost plugin frame, not boom's call
    assert crash_site(exc).endswith("; --debug shows the traceback)")


def test_a_harness_error_has_no_plugin_site() -> None:
    try:
        int("x")
    except ValueError as exc:
        assert plugin_frame(exc) is None and crash_site(exc) == ""


def test_an_inprocess_crash_names_the_plugin_line(
    faulty_root: Path, mlflow_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "configs/quickstart.yaml", "--set", "method=faulty", "--set", "method_params={mode: raise}"]
    args += ["--set", "budget.steps=4", "--set", "profile=homogeneous-4", "--set", "seeds=[0]"]
    code = main([*args, "--set", "dataset.params.train_size=256", "--set", "dataset.params.test_size=64"])
    err = capsys.readouterr().err
    assert code == 2, err
    line = err.strip().splitlines()[-1]
    assert re.search(
        rf"worker rank 1 failed: RuntimeError: injected failure \(at methods/faulty/method.py:{RAISE_LINE} "
        r"in train_step; --debug shows the traceback\)$",
        line,
    ), line


@pytest.mark.distributed
def test_a_dist_rank_crash_names_the_plugin_line(
    faulty_root: Path, profiles: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distrepro.config.run_config import validate_config
    from distrepro.orchestration.campaign import run_campaign

    cfg = validate_config(
        {
            "method": "faulty",
            "method_params": {"mode": "raise", "fail_rank": 1, "fail_step": 2},
            "profile": "pair-2",
            "engine": "dist",
            "dataset": {"params": {"train_size": 256, "test_size": 64, "image_size": 8}},
            "budget": {"steps": 4},
            "dist": {"timeout_s": 20},
        }
    )
    with pytest.raises(WorkerFailure) as info:
        run_campaign(cfg, show_progress=False, tracking_uri=mlflow_uri)
    assert info.value.rank == 1
    assert f"(at methods/faulty/method.py:{RAISE_LINE} in train_step; --debug shows the traceback)" in str(info.value)


def test_an_unexpected_error_outside_the_workers_names_the_plugin_line(tmp_path: Path) -> None:
    """What the CLI prints for a plugin's bug raised in the main process (``allocate``, ``plan``)."""
    from distrepro.errors import describe_unexpected

    exc = _raise_from(BOOM, tmp_path / "r", "tmp_boom_cli")
    line = describe_unexpected(exc, plugin_frame(exc))
    assert line.startswith("unexpected ValueError: deep (at methods/tmp_boom_cli/method.py:")
    assert "in _inner)" in line and line.endswith("rerun with --debug for the traceback")
