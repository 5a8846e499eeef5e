"""docs/architecture.md draws the import-linter layers contract of pyproject.toml, exactly."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _contract_layers() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    (container,) = contract["containers"]
    return [" | ".join(f"{container}.{part.strip()}" for part in layer.split("|")) for layer in contract["layers"]]


def _drawn_layers() -> list[str]:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"```text\n(.*?)```", text, flags=re.S)
    assert block, "docs/architecture.md has no ```text block drawing the stack"
    return [
        " | ".join(re.findall(r"distrepro(?:\.\w+)?", line.split("   ")[0]))
        for line in block[1].splitlines()
        if line.strip()
    ]


def test_the_architecture_doc_draws_the_layers_contract_top_to_bottom() -> None:
    assert _drawn_layers() == _contract_layers(), "update docs/architecture.md to the [tool.importlinter] layers"
