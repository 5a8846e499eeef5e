"""The nox sessions: importable on a bare Python with nox, one ``reproduce-<paper>`` per paper, extras on request."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import yaml
from noxmodule import noxfile_module

from distrepro.claims.papers import UnknownPaperError
from distrepro.errors import ConfigError
from distrepro.reproduction.selection import arm_extras

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def noxfile():
    return noxfile_module()


@pytest.mark.smoke
def test_noxfile_imports_only_the_standard_library_and_nox() -> None:
    """A fresh machine has Python, uv and nox only: a third-party import at load fails the quick start."""
    tree = ast.parse((REPO / "noxfile.py").read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert imported - set(sys.stdlib_module_names) == {"nox"}


@pytest.mark.smoke
def test_one_reproduce_session_per_paper(noxfile) -> None:
    assert {"cadp", "chao"} <= set(noxfile._papers())


@pytest.mark.smoke
def test_header_scan_agrees_with_the_yaml_parse_of_every_paper_file(noxfile) -> None:
    for path in sorted(REPO.glob("methods/*/paper.yaml")):
        data = yaml.safe_load(path.read_text())
        header = noxfile._paper_header(path)
        assert header.get("kind") == data.get("kind"), path
        assert header.get("id") == data["citation"]["id"], path
        assert header.get("title") == data["citation"].get("title"), path


@pytest.mark.smoke
@pytest.mark.parametrize(
    ("posargs", "arms"),
    [
        ([], []),
        (["--seeds", "0"], []),
        (["--with", "deepspeed_real"], ["deepspeed_real"]),
        (["--with=deepspeed_real"], ["deepspeed_real"]),
        (["--arms", "cadp,deepspeed_real"], ["cadp", "deepspeed_real"]),
    ],
)
def test_requested_arms_are_read_from_the_session_arguments(noxfile, posargs, arms) -> None:
    assert noxfile._requested_arms(posargs) == arms


@pytest.mark.smoke
@pytest.mark.parametrize(
    ("arms", "extras"),
    [
        ([], []),
        (["deepspeed_real"], ["deepspeed"]),
        (["cadp", "deepspeed_real"], ["deepspeed"]),
        (["cadp", "ddp"], []),
    ],
)
def test_reproduce_installs_the_extra_of_requested_optional_arms(arms, extras) -> None:
    assert arm_extras("cadp", arms) == extras


def test_an_unknown_arm_or_paper_is_refused_not_an_empty_list() -> None:
    with pytest.raises(ConfigError, match=r"setup\.arms.*unknown arm\(s\) \['nosuch'\]"):
        arm_extras("cadp", ["nosuch"])
    with pytest.raises(UnknownPaperError, match="unknown paper 'nosuch'"):
        arm_extras("nosuch", [])


@pytest.mark.smoke
def test_the_method_template_gets_no_session(noxfile) -> None:
    assert "my-paper" not in noxfile._papers()  # methods/_template/paper.yaml: a template, not a paper


@pytest.mark.smoke
def test_the_reproduce_sessions_share_one_virtualenv(noxfile) -> None:
    import nox.registry

    sessions = nox.registry.get()
    per_paper = [name for name in sessions if name.startswith("reproduce-")]
    assert "reproduce-cadp" in per_paper and "reproduce" in sessions
    assert all(sessions[name].venv_backend == "none" for name in per_paper)  # no virtualenv of their own
    assert sessions["reproduce"].venv_backend in (None, "uv")  # the one that installs


@pytest.mark.smoke
def test_the_ui_session_is_distrepro_ui(noxfile, monkeypatch) -> None:
    """``nox -s ui -- --port N`` hands its arguments to ``distrepro ui``, which prints the runs tables' addresses."""
    calls = []

    class Session:
        posargs = ("--port", "5001")

        def run(self, *args, **kwargs) -> None:
            calls.append(args)

    monkeypatch.setattr(noxfile, "_install", lambda session: None)
    noxfile.ui(Session())
    assert calls == [("distrepro", "ui", "--port", "5001")]
