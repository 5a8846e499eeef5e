"""The concept pages name only commands that exist: every ``distrepro <subcommand>`` in their code blocks is one of
the parser's subcommands, every ``nox -s <session>`` one of the noxfile's sessions, and every file they link to
exists. (``docs/writing-a-method.md``'s commands are run, as written, by tests/plugins/test_writing_a_method_doc.py.)
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from noxmodule import noxfile_module

from distrepro.cli.main import build_parser

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([*REPO.glob("docs/*.md"), REPO / "CONTRIBUTING.md", REPO / "CHANGELOG.md"])

pytestmark = pytest.mark.smoke


def _code(page: Path) -> str:
    return "\n".join(re.findall(r"```[a-z]*\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S))


def _subcommands() -> set[str]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


def _sessions() -> set[str]:
    return {"tests", "smoke", "lint", "demo", "ui", "report"} | {f"reproduce-{p}" for p in noxfile_module()._papers()}


def test_the_concept_pages_exist() -> None:
    names = {p.name for p in PAGES}
    wanted = {"getting-started.md", "writing-a-method.md", "claims.md", "emulator.md", "multinode.md"}
    assert wanted | {"glossary.md", "architecture.md", "contributing.md", "CONTRIBUTING.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_commands_and_links_exist(page: Path) -> None:
    code = _code(page)
    unknown = set(re.findall(r"(?<![\w./-])(?<!from )(?<!import )distrepro ([a-z][a-z-]*)", code)) - _subcommands()
    assert not unknown, f"{page.name} names distrepro subcommands that do not exist: {sorted(unknown)}"
    sessions = set(re.findall(r"nox -s ([\w.-]+)", code)) - _sessions()
    assert not sessions, f"{page.name} names nox sessions that do not exist: {sorted(sessions)}"
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8"))
    missing = [link for link in links if not (page.parent / link).exists()]
    assert not missing, f"{page.name} links to missing files: {missing}"
