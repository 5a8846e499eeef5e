"""Shared by several test modules (moved out of test_reproduce.py so tests in other folders can use it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PAPER = """\
kind: reproduction
citation: {id: tinypaper, title: "A tiny paper", venue: "Tests 2026"}
setup:
  profile: hetero-2fast-2slow
  min_seeds: 2
  baseline: sync
  arms:
    sync: {method: ar_sgd, config: tiny.yaml}
    local: {method: local_sgd, params: {period: 2}, config: tiny.yaml}
    rare: {method: local_sgd, params: {period: 4}, config: tiny.yaml, optional: true, extra: nothing}
claims:
  - id: fewer-bytes
    kind: relative_improvement
    arm: local
    baseline: sync
    metric: comm/bytes_total
    direction: min
    form: ratio
    claimed: 2.0  # improvement factor baseline/arm: half the traffic
    accept: {rel_tolerance: 0.2}  # geometric mean, t on log-ratios: bytes do not vary by seed (zero width)
    source: {kind: text, quote: "averaging every 2 steps halves the traffic"}
    evidence: derived
"""


@pytest.fixture
def paper_root(tmp_path: Path, monkeypatch) -> Path:
    return write_paper_root(tmp_path, monkeypatch)


def write_paper_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tiny paper's root under ``tmp_path``, found through ``DISTREPRO_ROOT``, ``tmp_path`` the working folder
    (reports land there); a module-scoped fixture calls it with a folder and a ``MonkeyPatch.context()``."""
    root = tmp_path / "root"
    (root / "methods" / "tiny").mkdir(parents=True)
    for name in ("ar_sgd", "local_sgd"):
        os.symlink(REPO / "methods" / name, root / "methods" / name)
    os.symlink(REPO / "methods" / "local_sgd" / "method.py", root / "methods" / "tiny" / "method.py")
    (root / "methods" / "tiny" / "paper.yaml").write_text(PAPER)
    (root / "methods" / "tiny" / "tiny.yaml").write_text(CONFIG)
    os.symlink(REPO / "datasets", root / "datasets")
    os.symlink(REPO / "hardware_profiles", root / "hardware_profiles")
    monkeypatch.setenv("DISTREPRO_ROOT", str(root))
    monkeypatch.chdir(tmp_path)
    return root


CONFIG = """\
method: ar_sgd
profile: hetero-2fast-2slow
dataset: {params: {train_size: 256, test_size: 128, image_size: 8}}
budget: {steps: 4}
eval: {times: 1}
seeds: [0, 1]
torch_threads: 1
"""


def own_profiles(root: Path) -> Path:
    """``root``'s hardware_profiles as a copy (:func:`paper_root` links the shipped folder), so a test may edit one."""
    import shutil

    link = root / "hardware_profiles"
    target = link.resolve()
    link.unlink()
    shutil.copytree(target, link)
    return link
