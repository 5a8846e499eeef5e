"""The report's pre-registration stamp and its list of choices made after the verdicts were seen.

A reader of the report, not only of BENCHMARKS.md, must see which verdicts were decided by a test fixed in
advance: the record of the judged scale (hash, date, commit, seeds, sequential plan), the claims edited or added
after it (hash check, :func:`distrepro.claims.certification.check_claims`), the runs on seeds outside the
registered ones, how n was chosen where a pilot chose it (one line per claim), and each claim's own ``post_hoc``
notes from paper.yaml (a seed count raised after an INCONCLUSIVE, a threshold or metric changed after a FAIL).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distrepro.claims.certification import NOT_FROZEN, check_claims
from distrepro.claims.preregistration import (
    exploratory_seeds,
    load_record,
    raw_claims,
    record_digest,
    record_path,
)


def load_scale_record(paper_file: Path | None, scale: str) -> tuple[Path | None, dict[str, Any] | None]:
    """The record of ``scale`` beside ``paper_file`` (path and content), or ``(None, None)``."""
    if paper_file is None:
        return None, None
    path = record_path(paper_file, scale)
    return path, load_record(path)


def _pilot_lines(block: Any) -> list[str]:
    """How the record chose n from a pilot's spread (its ``pilot:`` block): one line per claim; none without it."""
    if not isinstance(block, dict):
        return []
    from distrepro.claims.pilot import claim_line, summary_line

    cap = int(block.get("max_seeds") or 0)
    claims = block.get("claims") or {}
    return ["", f"{summary_line(block)}.", ""] + [f"- {claim_line(cid, e, cap)}" for cid, e in claims.items()]


def _commit_text(record: dict[str, Any]) -> str:
    """The record's commit in full (40 hex digits) with its dirty state: never cut, a note such as ``+uncommitted
    claims file`` must stay visible."""
    block = record.get("frozen")
    if isinstance(block, dict) and not str(block.get("commit", "")).startswith("unknown"):
        dirty = block.get("dirty") or []
        note = f" with uncommitted changes in {', '.join(f'`{d}`' for d in dirty)}" if dirty else " (clean)"
        return f"`{block.get('commit', '?')}`{note}"
    commit = str((block if isinstance(block, dict) else record).get("commit", "?"))
    if commit.startswith("unknown"):  # "(clean)" would certify what no checkout could tell
        return "unknown (the record was written outside a git checkout: which code it froze cannot be checked)"
    return f"`{commit}`"


def _frozen_lines(record: dict[str, Any], standing: Any) -> list[str]:
    """What the record freezes beside the claims (or that it freezes nothing more), and the reasons that make every
    verdict of the record post hoc (a late or replaced record, an input changed since)."""
    block = record.get("frozen")
    if not isinstance(block, dict):
        lines = ["", f"**Not frozen**: {NOT_FROZEN}; each verdict is marked *not frozen*."]
    else:
        inputs = block.get("inputs") or {}
        counts = ", ".join(f"{kind} ({len(files)})" for kind, files in inputs.items() if files)
        samples = block.get("samples", "?")
        lines = ["", f"The record freezes {counts} and {samples} hardware samples of the sensitivity check."]
    if standing is not None and standing.notes:
        lines += ["", *(f"Note: {note}." for note in standing.notes)]
    if standing is not None and standing.record_reasons:
        lines += ["", "Every verdict at this scale is **post hoc**:", ""]
        lines += [f"- {reason}." for reason in standing.record_reasons]
    return lines


def _dropped(record: dict[str, Any], paper_file: Path | None) -> dict[str, list[str]]:
    """Registered claims that paper.yaml no longer holds: dropping a claim after its verdict was seen is a choice
    made after the fact too."""
    if paper_file is None:
        return {}
    written = raw_claims(paper_file)
    gone = [cid for cid in record.get("claims") or {} if cid not in written]
    return {cid: ["**post hoc**: registered, then removed from paper.yaml"] for cid in gone}


def _closing_lines(record: dict[str, Any] | None, standing: Any, exploratory: bool, noted: bool) -> list[str]:
    """What the section certifies, only where it could check it: nothing without a record or for the exploratory
    report; the checks it could not make, where it could not make them; else that nothing was chosen after the
    verdicts were seen (``noted``: post-hoc choices are listed above)."""
    if record is None or exploratory or noted:
        return []
    if standing is None:
        return [
            "",
            "Not checked against the runs: this report cannot certify that nothing was chosen after the "
            "verdicts were seen.",
        ]
    if standing.unchecked:
        return [
            "",
            f"**Not certified**: {'; '.join(standing.unchecked)}, so this report cannot say that nothing "
            "was chosen after the verdicts were seen.",
        ]
    if standing.post_hoc:
        return []
    return ["", "No claim judged here was chosen or changed after its verdicts were seen."]


def _seed_lines(
    record: dict[str, Any], paper: str, run_seeds: list[int], set_aside: list[int], exploratory: bool
) -> list[str]:
    """Which runs this report judges against the record's seeds: the exploratory report says it is one."""
    if exploratory:
        seeds = set_aside or exploratory_seeds(record, run_seeds)
        return [
            "",
            "**Exploratory report**: it judges only the runs on seeds outside the registered ones"
            f"{f' ({index_text(seeds)})' if seeds else ''}; none of its verdicts is the registered test, which is "
            f"`reports/{paper}/report.md`.",
        ]
    outside = sorted(set(set_aside) | set(exploratory_seeds(record, run_seeds)))
    if not outside:
        return []
    return [
        "",
        f"Runs on seeds outside the registered ones ({index_text(outside)}) are exploratory: they are left out of "
        f"this report and judged in its exploratory report (`reports/{paper}/exploratory/`).",
    ]


def index_text(seeds: list[int]) -> str:
    return ", ".join(map(str, seeds))


def _stamp(record: dict[str, Any], path: Path) -> str:
    """The record's hash, date, commit, claims file, confirmatory seeds and design, as one sentence."""
    from distrepro.config.run_config import index_spans

    plan = record.get("sequential") or {}
    level = 100 * float(plan.get("interval", 0.95))
    alpha = 100 * float(plan.get("alpha_one_sided", 0.025))
    design = (
        f"Pocock group-sequential plan, looks at {plan.get('looks')} seeds, each judged with a "
        f"{level:.2f} % interval (one-sided {alpha:.1f} % overall)"
        if plan.get("design") == "pocock"
        else f"fixed n = {record.get('n')}, 95 % intervals"
    )
    seeds = record.get("seeds") or []
    return (
        f"Record `{path.parent.name}/{path.name}` (sha256 `{record_digest(path)}`), registered {record['date']} "
        f"at commit {_commit_text(record)}; claims file sha256 `{str(record['claims_sha256'])[:12]}`; "
        f"confirmatory seeds {index_spans(seeds)} (n = {len(seeds)}); {design}."
    )


def preregistration_section(
    spec: Any,
    paper_file: Path | None,
    scale: str,
    run_seeds: list[int] | None = None,
    standing: Any | None = None,
    set_aside: list[int] | None = None,
    exploratory: bool = False,
) -> str:
    """Markdown: the stamp of ``scale``'s record (or that there is none), what it freezes, and every post-hoc choice.
    ``standing``: what the record certifies (:func:`distrepro.claims.certification.standing`); ``set_aside``: the
    seeds of the runs the report left out; ``exploratory``: the report of the runs outside the record."""
    if spec is None or not spec.claims:
        return ""
    judged = [c for c in spec.claims if c.scale == scale]
    path, record = load_scale_record(paper_file, scale)
    lines = ["## Pre-registration", ""]
    marked: dict[str, list[str]] = {c.id: list(c.post_hoc) for c in judged}
    if record is None or path is None:
        command = f"distrepro preregister {spec.citation.id} --scale {scale}"
        lines.append(
            f"No pre-registration record for the {scale} scale (`{command}`): every verdict below is exploratory, "
            "its claim and analysis not frozen before the runs."
        )
    else:
        lines.append(_stamp(record, path))
        lines += _frozen_lines(record, standing)
        lines += _pilot_lines(record.get("pilot"))
        for status in check_claims(record, paper_file, [c.id for c in judged]) if paper_file else []:
            if status.post_hoc:
                marked.setdefault(status.claim_id, []).insert(0, f"**post hoc**: {status.status}")
        lines += _seed_lines(record, spec.citation.id, run_seeds or [], set_aside or [], exploratory)
        marked.update(_dropped(record, paper_file))
    notes = {cid: items for cid, items in marked.items() if items}
    if notes:
        lines += ["", "Choices made after the verdicts were seen (post hoc), per claim:", ""]
        lines += [f"- `{cid}`: " + "; ".join(i.rstrip(". ") for i in items) + "." for cid, items in notes.items()]
    lines += _closing_lines(record, standing, exploratory, bool(notes))
    if standing is not None and standing.post_hoc:
        lines += [
            "",
            f"Post-hoc verdicts ({len(standing.post_hoc)}) are shown and marked but left out of the tally.",
        ]
    return "\n".join(lines) + "\n"
