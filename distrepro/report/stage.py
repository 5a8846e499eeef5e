"""Which step of a report is running, for the heartbeat a long report stage prints.

A reproduction's report stage (reading every run, the hardware check, judging, drawing, writing) ran for minutes
printing only ``[alive] report for chao``. Each step now names itself here, with a count where one is known, and
the heartbeat reads it: ``[alive 3m25s] report for chao: step 4 of 6, drawing 14 figures (1m02s in this step)``.
One process builds one report at a time, so a module-level tracker is enough; reading it from the heartbeat's
thread needs no lock (one object replaced at once).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

#: the report's steps, in order: what :func:`enter` numbers them by
STEPS = ("reading the runs", "the hardware check", "judging", "drawing", "the method's sections", "writing")


@dataclass(frozen=True)
class Stage:
    step: str = ""
    detail: str = ""
    since: float = field(default_factory=time.monotonic)


_current = Stage()


def enter(step: str, detail: str = "") -> None:
    """Step ``step`` (one of :data:`STEPS`) starts; ``detail`` says what it counts (``14 figures``)."""
    global _current
    _current = Stage(step, detail)


def describe() -> str:
    """``step 4 of 6, drawing 14 figures (1m02s in this step)``; empty before the first step."""
    stage = _current
    if not stage.step:
        return ""
    index = STEPS.index(stage.step) + 1 if stage.step in STEPS else 0
    where = f"step {index} of {len(STEPS)}, " if index else ""
    spent = int(time.monotonic() - stage.since)
    what = f"{stage.step}{' ' + stage.detail if stage.detail else ''}"
    return f"{where}{what} ({spent // 60}m{spent % 60:02d}s in this step)"


def reset() -> None:
    enter("")
