"""The report's default check of its timing verdicts over the plausible hardware, and its short section.

Every report computes it (:mod:`distrepro.sensitivity.dependence`) unless asked not to (``--no-sensitivity``);
``--sensitivity`` replaces it by the full sweep and its section (:mod:`distrepro.report.sensitivity_section`).
A verdict that PASSes in more than 5 % and fewer than 95 % of the settings is marked "depends on <figure>" and
counted apart from the headline PASS/FAIL tally (:func:`distrepro.claims.tally.mark_dependence`); claims merged
into one unit are judged as one in every setting, and the unit's share decides for all of them. This section says
which claims were re-judged, in what share of the settings each (and its unit) PASSes, which were not and why, and
what the check cost.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distrepro.claims.tally import FIRM_ABOVE, FIRM_BELOW, mark_dependence
from distrepro.errors import DistreproError

_log = logging.getLogger(__name__)

TITLE = "### Timing verdicts over the plausible hardware"


def check_dependence(
    info: Any, rs: Any, cache_dir: Path | None, samples: int | None = None, progress: Any = None
) -> Any | None:
    """The paper's :class:`~distrepro.sensitivity.dependence.Dependence` (cached in ``cache_dir``), ``None`` without
    timing claims. A check that cannot run at all (e.g. a ``setup.sensitivity`` assumption naming an unknown arm)
    is returned with its ``error`` set, so the report says why its timing verdicts are unmarked rather than
    failing whole. ``progress``: told of each phase and setting (:class:`distrepro.orchestration.progress.Phases`)."""
    from distrepro.sensitivity.dependence import Dependence, timing_dependence

    try:
        return timing_dependence(info, rs, samples, cache_dir, progress=progress)
    except DistreproError as exc:
        _log.warning("the timing verdicts of %s were not checked over the plausible hardware: %s", info.id, exc)
        return Dependence(samples or 0, 0, [], [], {}, error=str(exc))


def apply(dependence: Any, verdicts: Sequence[Any], claims: Sequence[Any] = ()) -> None:
    """Mark the verdicts whose PASS share (their unit's, for claims merged by ``same_as``/``counts_with`` among
    ``claims``) lies strictly between 5 % and 95 %."""
    mark_dependence(verdicts, dependence.shares(), dependence.settings(), claims, dependence.skipped)


def share_text(share: float, v: Any, pct: str = " %") -> str:
    """``38 %``, or for a merged claim ``3 % (its unit with A-C4: 6 %)``: the unit's share is the one that counts."""
    own = f"{100 * share:.0f}{pct}"
    if v is None or getattr(v, "unit_pass_share", None) is None:
        return own
    return f"{own} (its unit with {', '.join(v.unit_with)}: {100 * v.unit_pass_share:.0f}{pct})"


def _cost(dep: Any) -> str:
    if dep.cached:
        return f"read from `{_cache_name()}` (same claims, profiles, code and runs as when it was computed)"
    return f"{dep.cpu_s:.0f} s of CPU ({dep.wall_s:.0f} s wall) to compute, cached in `{_cache_name()}`"


def _cache_name() -> str:
    from distrepro.sensitivity.dependence import CACHE_FILE

    return CACHE_FILE


def dependence_section(dep: Any, verdicts: Sequence[Any], paper: str) -> str:
    """Markdown: what the check re-judged, each claim's share and mark, what it left out and why."""
    lines = [TITLE, ""]
    if dep.error:
        return "\n".join([*lines, f"_Not checked: {dep.error}. The timing verdicts above carry no mark._", ""])
    by_id = {v.claim_id: v for v in verdicts}
    lo, hi = f"{100 * FIRM_BELOW:.0f} %", f"{100 * FIRM_ABOVE:.0f} %"
    lines += [
        f"Each verdict decided by emulated time, re-judged at {dep.samples} settings of the estimated hardware "
        f"figures and method assumptions ({len(dep.variables)} figures; a Latin hypercube over their declared "
        "ranges). The runs are re-timed analytically; their training is unchanged. A claim that PASSes in more than "
        f"{lo} and fewer than {hi} of the settings depends on the figure named (the one whose values rank-correlate "
        "most with the claim's statistic), and the headline tally counts it apart from PASS and FAIL. "
        f"`distrepro report {paper} --sensitivity` gives the full sweep (tornado, flip points, heat maps); "
        "`--no-sensitivity` skips this check.",
        "",
    ]
    if dep.claims:
        head = "| Claim | Verdict | PASS share | PASS · FAIL · INCONCLUSIVE | Moved most by | Counted |"
        lines += [head, "|---" * 6 + "|"]
        for c in dep.claims:
            v = by_id.get(c.claim_id)
            verdict = v.verdict if v is not None else "—"
            counted = f"apart: depends on `{v.depends_on}`" if v is not None and v.depends_on else "as its verdict"
            split = " · ".join(str(c.counts.get(k, 0)) for k in ("PASS", "FAIL", "INCONCLUSIVE"))
            figure = f"`{c.decisive}`" if c.decisive else "nothing (same statistic everywhere)"
            lines.append(f"| {c.claim_id} | {verdict} | {share_text(c.share, v)} | {split} | {figure} | {counted} |")
        lines.append("")
    if dep.skipped:
        lines += ["Not re-judged (their verdicts carry no mark):", ""]
        lines += [f"- {cid}: {why}" for cid, why in sorted(dep.skipped.items())]
        lines.append("")
    err = dep.max_validation_error
    check = (
        f"; analytical vs logged emulated times at the central values agree within {err:.1e}"
        if math.isfinite(err)
        else ""
    )
    lines += [f"_Cost: {_cost(dep)}{check}._", ""]
    return "\n".join(lines)


def summary_line(dep: Any, verdicts: Sequence[Any] | None = None) -> str:
    """One line for the CLI: how many timing verdicts were checked, how many depend on an assumption, the cost.
    With the report's ``verdicts`` (marked by :func:`apply`), the marks they carry are counted (a merged claim's
    follows its unit's share)."""
    if dep.error:
        return f"timing verdicts not checked over the plausible hardware: {dep.error}"
    marked = (
        sum(bool(v.depends_on) for v in verdicts)
        if verdicts is not None
        else sum(FIRM_BELOW < c.share < FIRM_ABOVE for c in dep.claims)
    )
    cost = "cached" if dep.cached else f"{dep.cpu_s:.0f} s CPU"
    left = f", {len(dep.skipped)} not re-timed" if dep.skipped else ""
    return (
        f"timing verdicts over {dep.samples} plausible hardware settings: {len(dep.claims)} checked, "
        f"{marked} depend on an assumption{left} ({cost}; --no-sensitivity skips, --sensitivity for the full sweep)"
    )
