"""Where a run's checkpoints lie, and which of them is complete.

The engine that writes checkpoints (:mod:`distrepro.engine.checkpoint`), orchestration that resumes a campaign from
them and the conformance checks that test the round trip all need the folder layout, but only the engine needs what
is inside a rank file; so the layout sits here, in the run specification below all three.
"""

from __future__ import annotations

from pathlib import Path

#: written by rank 0 after a barrier once every rank's file is on disk: a folder without it is not a checkpoint
MARKER = "COMPLETE"


def step_dir(root: Path, step: int) -> Path:
    """The folder of the checkpoint taken at ``step`` under a run's checkpoint folder ``root``."""
    return root / f"step{step:09d}"


def latest_complete(root: Path) -> Path | None:
    """The newest complete checkpoint under ``root`` (a run's checkpoint folder), or None."""
    if not root.is_dir():
        return None
    done = sorted(d for d in root.iterdir() if d.is_dir() and (d / MARKER).is_file())
    return done[-1] if done else None
