"""How much NCCL's algorithm choice moves each config's planned step: the flat model vs NCCL's rule.

For every config given, ``distrepro plan``'s estimate twice: with every collective pinned to the flat ring (the
model it replaced, ``collective_algorithm: ring``) and as the profile says (``auto``: NCCL's algorithm and
protocol): compute per step, communication per step, and each collective's algorithm and protocol. A plan prices
the method's own ``comm`` entries, lockstep and without overlap, so this bounds how far a timing verdict can move
where no run was repeated (BENCHMARKS.md, "Emulator validation").

    python benchmarks/plan_collectives.py methods/chao_alloc/configs/*.yaml
"""

from __future__ import annotations

import contextlib
import io
import sys
from typing import Any

from distrepro.orchestration.plan import build_plan
from distrepro.timing import timemodel

_ORIGINAL = timemodel.CommCostModel.collective


def _flat(self: Any, pattern: str, ranks: Any, nbytes: float, src: int | None = None, algorithm: str | None = None):
    return _ORIGINAL(self, pattern, ranks, nbytes, src=src, algorithm=algorithm or "ring")


def _plan(path: str, flat: bool) -> dict[str, Any]:
    timemodel.CommCostModel.collective = _flat if flat else _ORIGINAL  # type: ignore[method-assign]
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return build_plan(path)["time"]
    finally:
        timemodel.CommCostModel.collective = _ORIGINAL  # type: ignore[method-assign]


def line(path: str) -> str:
    try:
        old, new = _plan(path, True), _plan(path, False)
    except Exception as exc:  # a config whose data or extra is missing here
        return f"{path}: not planned ({type(exc).__name__}: {str(exc)[:80]})"
    compute = f"compute {old['slowest_compute_s_per_step']:.6g} -> {new['slowest_compute_s_per_step']:.6g} s"
    o, n = old.get("comm_s_per_step"), new.get("comm_s_per_step")
    if not isinstance(o, float) or not isinstance(n, float):
        return f"{path}: {compute}; communication not estimated ({new.get('why')})"
    how = ", ".join(f"{c['pattern']}: {c.get('algorithm')}/{c.get('protocol')}" for c in new.get("collectives", []))
    change = (n - o) / o if o else 0.0
    return f"{path}: {compute}; communication {o:.6g} -> {n:.6g} s per step ({change:+.2%}) [{how}]"


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(line(arg))
