"""Which arm the speedup figure divides each profile's arms by, and which claimed speedups it can mark.

A report's arms may run on several emulated clusters (Chao's 18 arms on 7 profiles). A speedup of an arm on
one profile over the paper's baseline on another would compare two clusters, not two methods, so each
profile gets its own reference: the arm there that is set up as the baseline is (same method and params in
``paper.yaml`` ``setup.arms``), and the figure (:func:`distrepro.report.figures.arms.speedup_figure`) draws
one row of panels per profile.
"""

from __future__ import annotations

from distrepro.claims.schema import PaperSpec
from distrepro.report.figures.palette import ArmStyle


def speedup_references(spec: PaperSpec | None, baseline: str | None, style: ArmStyle) -> dict[str, str]:
    """Profile → the arm the speedup figure divides that profile's arms by: ``baseline`` on its own profile; on
    another, the one arm there set up as ``baseline`` is (same method and params in ``setup.arms``, e.g. Chao's
    ``equal-1to2`` for ``equal-1124``), or ``baseline`` itself where it ran on several profiles (``<arm> @
    <profile>``). A profile with none or several such arms gets no reference (no speedup is drawn there)."""
    if not baseline:
        return {}
    arms = spec.setup.arms if spec else {}
    base = arms.get(baseline)

    def twin(label: str) -> bool:
        name = label.split(" @ ")[0]
        if name == baseline:
            return True
        arm = arms.get(name)
        return base is not None and arm is not None and (arm.method, arm.params) == (base.method, base.params)

    candidates: dict[str, list[str]] = {}
    for label in style.order:
        if twin(label):
            candidates.setdefault(style.groups.get(label, ""), []).append(label)
    refs = {group: found[0] for group, found in candidates.items() if len(found) == 1}
    if baseline in style.order:  # the paper's own baseline is its profile's reference whatever else ran there
        refs[style.groups.get(baseline, "")] = baseline
    return refs


def speedup_marks(
    spec: PaperSpec | None, references: dict[str, str], style: ArmStyle
) -> dict[str, list[tuple[str, str, float]]]:
    """Claimed speedups the speedup figure can show: emulated budget time or logged time to target, of an arm
    over its profile's reference arm (a claim over another arm would be drawn on the wrong bar)."""
    marks: dict[str, list[tuple[str, str, float]]] = {}
    default = spec.setup.baseline if spec else None
    for c in spec.claims if spec else []:
        if c.kind != "speedup" or c.clock != "emulated" or c.target is not None:
            continue
        arm = c.arm or ""
        if (c.baseline or default) != references.get(style.groups.get(arm, "")):
            continue
        measure = "budget" if c.measure == "budget_time" else "to target"
        values = c.claimed if isinstance(c.claimed, tuple) else (c.claimed,)
        marks.setdefault(arm, []).extend((c.id, measure, float(v)) for v in values)
    return marks
