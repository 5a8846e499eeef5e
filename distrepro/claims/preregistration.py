"""Pre-registration: a frozen record of what a reproduction will judge, written before its confirmatory runs.

A verdict is evidence only if its claim, margin, seed count and analysis were fixed before the data that decides
it (registered reports; Nosek et al., PNAS 115, 2018). Per paper and scale, ``distrepro preregister`` writes
``methods/<paper>/preregistration/<scale>.yaml``: the claims file's SHA-256, one hash per claim judged at that
scale, each claim's margin or band, minimum seeds and regime thresholds, the confirmatory seeds, the
group-sequential plan if seeds may be added (:mod:`distrepro.claims.sequential`), the date, and a ``frozen:`` block:
one SHA-256 per input that decides a verdict beside the claims (paper.yaml with its ``setup:``, the arms' run
configs, the hardware profiles with their ranges, the emulator's error bands, the emulator and claims code: see
:mod:`distrepro.claims.frozen`), the hardware samples of the sensitivity check, the full commit and its uncommitted
files. The record is committed before the runs; every report of that scale stamps it and marks a verdict *post hoc*
(:mod:`distrepro.claims.certification`) when its claim changed or is new, when the record is newer than the first
run on its seeds, when it replaced an earlier record (``--replace`` keeps a ``replaced:`` history), or when a frozen
input changed since. A record without ``frozen:`` (written before it existed) cannot certify those inputs: its
verdicts are marked *not frozen*. Seeds that runs in the store already used are refused unless ``--post-hoc``
(:func:`refuse_used_seeds`), and every record read is checked field by field before anything trusts it
(:func:`load_record`, :mod:`distrepro.claims.record_check`).

Confirmatory seeds start at :data:`CONFIRMATORY_FIRST_SEED` (100) by default: indices no earlier look has used,
so earlier runs on seeds 0-9 stay exploratory by construction.

A claim's hash covers every field that decides its verdict; ``notes`` and ``post_hoc`` (what the report says
about the claim, not how it is judged) are left out, so documenting a choice does not make it post hoc.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from distrepro.claims import frozen as frozen_inputs
from distrepro.claims.record_check import DATE_FORMAT, check_record
from distrepro.claims.seed_history import store_uses
from distrepro.claims.sequential import ONE_SIDED_ALPHA, pocock_boundary, pocock_level
from distrepro.config.run_config import read_yaml
from distrepro.errors import ConfigError
from distrepro.safe_write import make_folder, write_text

CONFIRMATORY_FIRST_SEED = 100
#: fields of a claim that describe it without changing its verdict
_UNHASHED = ("notes", "post_hoc")
_DECIDING = ("claimed", "margin", "margin_kind", "accept", "metric", "direction", "form", "measure", "target", "arms")


def record_path(paper_file: Path, scale: str) -> Path:
    """Where the record of ``scale`` lives: beside the paper.yaml, ``preregistration/<scale>.yaml``."""
    return paper_file.parent / "preregistration" / f"{scale}.yaml"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def claim_hash(raw_claim: dict[str, Any]) -> str:
    """SHA-256 of the claim as written in paper.yaml (YAML anchors resolved), without ``notes``/``post_hoc``."""
    kept = {k: v for k, v in raw_claim.items() if k not in _UNHASHED}
    return hashlib.sha256(_canonical(kept).encode()).hexdigest()


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def raw_claims(paper_file: Path) -> dict[str, dict[str, Any]]:
    """The claims of ``paper_file`` as parsed YAML, by id (the hashes are of what the author wrote)."""
    raw = read_yaml(paper_file)
    return {str(c.get("id")): c for c in raw.get("claims") or [] if isinstance(c, dict)}


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def _commit(paper_file: Path) -> str:
    """HEAD, with ``+uncommitted`` when the claims file differs from it (the record then freezes the file's bytes)."""
    head = _git(["rev-parse", "HEAD"], paper_file.parent)
    if head is None:
        return "unknown (not a git checkout)"
    dirty = _git(["status", "--porcelain", "--", paper_file.name], paper_file.parent)
    return head + (" +uncommitted claims file" if dirty else "")


def _dirty(paths: list[Path]) -> list[str]:
    """Which of ``paths`` (files, or folders of code) differ from HEAD in their git checkout."""
    out = []
    for path in paths:
        if _git(["status", "--porcelain", "--", path.name], path.parent):
            out.append(path.name if path.is_file() else f"{path.name}/")
    return out


@dataclass(frozen=True)
class SimpleSpec:
    """A paper file and its spec, as :mod:`distrepro.claims.frozen` reads a paper."""

    path: Path
    spec: Any


def _scales_used(spec_at_scale: Any, scale: str) -> list[str]:
    """``scale`` and every scale its claims move to (:func:`distrepro.claims.schema.at_scale` keeps timing claims
    at proxy): the scales whose arm configs the verdicts read."""
    return list(dict.fromkeys([scale, *(c.scale for c in spec_at_scale.claims if c.scale)]))


def frozen_now(paper_file: Path, spec_at_scale: Any, scale: str, root: Path | None = None) -> dict[str, dict[str, str]]:
    """The digests of every input the verdicts at ``scale`` depend on, as they are now (kind → file → SHA-256):
    paper.yaml, the arms' configs at the scales used (:func:`_scales_used`), the profiles they and the claims name,
    the error bands, the emulator's code and the code the runs train with
    (:func:`distrepro.claims.frozen.file_digests`)."""
    paper = SimpleSpec(paper_file, spec_at_scale)
    return frozen_inputs.file_digests(paper, _scales_used(spec_at_scale, scale), root)


def _frozen_block(
    paper_file: Path, spec_at_scale: Any, scale: str, samples: int | None, root: Path | None
) -> dict[str, Any]:
    """The record's ``frozen:`` block: the inputs' digests, the hardware samples, the full commit and which covered
    files (and code folders) differ from it."""
    import distrepro

    paper = SimpleSpec(paper_file, spec_at_scale)
    files = frozen_inputs.input_files(paper, _scales_used(spec_at_scale, scale), root)
    package = Path(distrepro.__file__).resolve().parent
    packages = (*frozen_inputs.CODE_PACKAGES, *frozen_inputs.TRAINING_PACKAGES)
    covered = [p for group in files.values() for p in group] + [package / s for s in packages]
    head = _git(["rev-parse", "HEAD"], paper_file.parent)
    return {
        "inputs": frozen_now(paper_file, spec_at_scale, scale, root),
        "samples": frozen_inputs.sensitivity_samples(spec_at_scale, samples),
        "commit": head or "unknown (not a git checkout)",
        "dirty": _dirty(covered) if head else [],
    }


def _claim_entry(claim: Any, raw: dict[str, Any], min_seeds: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"sha256": claim_hash(raw), "kind": claim.kind, "decided_by": claim.decided_by}
    for key in _DECIDING:
        if key in raw:
            entry[key] = raw[key]
    entry["min_seeds"] = claim.accept.min_seeds or min_seeds
    if claim.regime:
        entry["regime"] = {
            c.id: c.model_dump(exclude_none=True, exclude={"id", "what", "source"}) for c in claim.regime
        }
    return entry


def build_record(
    paper: str,
    paper_file: Path,
    spec_at_scale: Any,
    scale: str,
    seeds: list[int],
    looks: list[int] | None = None,
    now: _dt.datetime | None = None,
    pilot: dict[str, Any] | None = None,
    samples: int | None = None,
    root: Path | None = None,
) -> dict[str, Any]:
    """The record of ``paper`` at ``scale``: ``spec_at_scale`` is the resolved spec moved to ``scale``
    (:func:`distrepro.claims.schema.at_scale`); only the claims judged there are registered. ``looks`` (seed
    counts, e.g. [5, 10]) declares a Pocock group-sequential plan; without it the design is a fixed n on the
    confirmatory ``seeds``. ``pilot`` is the ``pilot:`` block of a plan from a pilot's spread
    (:mod:`distrepro.claims.pilot`): how n was chosen. ``samples``: the hardware samples of the sensitivity check
    (``--samples``; default the paper's), frozen with the inputs (:func:`frozen_now`) in the ``frozen:`` block."""
    if not seeds:
        raise ConfigError(paper_file, "preregister --seeds", "a record needs the confirmatory seeds")
    if looks and looks[-1] != len(seeds):
        why = f"the last look ({looks[-1]} seeds) must be all {len(seeds)} confirmatory seeds"
        raise ConfigError(paper_file, "preregister --looks", why)
    raw = raw_claims(paper_file)
    judged = [c for c in spec_at_scale.claims if c.scale == scale]
    when = (now or _dt.datetime.now(_dt.UTC)).strftime(DATE_FORMAT)
    sequential: dict[str, Any] = {"design": "fixed", "n": len(seeds), "interval": 0.95}
    if looks:
        sequential = {
            "design": "pocock",
            "looks": list(looks),
            "alpha_one_sided": ONE_SIDED_ALPHA,
            "boundary_z": round(pocock_boundary(looks), 4),
            "interval": round(pocock_level(looks), 4),
        }
    record = {
        "paper": paper,
        "scale": scale,
        "date": when,
        "commit": _commit(paper_file),
        "claims_file": paper_file.name,
        "claims_sha256": file_hash(paper_file),
        "seeds": list(seeds),
        "n": len(seeds),
        "sequential": sequential,
        "claims": {c.id: _claim_entry(c, raw[c.id], spec_at_scale.setup.min_seeds) for c in judged},
    }
    if pilot is not None:
        record["pilot"] = pilot
    record["frozen"] = _frozen_block(paper_file, spec_at_scale, scale, samples, root)
    return record


def refuse_frozen(path: Path, replace: bool) -> None:
    """An existing record is frozen: writing over it needs ``replace``."""
    if path.exists() and not replace:
        why = "already registered; a record is frozen (pass --replace and commit why, git keeps the old one)"
        raise ConfigError(path, "preregistration", why)


def write_record(record: dict[str, Any], path: Path, replace: bool = False) -> Path:
    """Write ``record`` to ``path``; an existing record is frozen: replacing it needs ``replace`` (and a commit
    that says why: the old record stays in git history)."""
    refuse_frozen(path, replace)
    if path.exists():  # replaced: the history stays in the record, so every later report can say so
        try:
            old = load_record(path) or {}
        except ConfigError:  # a record refused as it stands may still be replaced; its own history is not kept
            old = {}
        entry = {
            "date": _dt.datetime.now(_dt.UTC).strftime(DATE_FORMAT),
            "sha256": file_hash(path),
            "registered": str(old.get("date", "?")),
            # the seeds the replaced record registered: a replacement on seeds none of its predecessors registered
            # is a new confirmatory test with the earlier runs as its pilot (certification.fresh_replacement)
            "seeds": [int(s) for s in old.get("seeds") or []],
        }
        record["replaced"] = [*(old.get("replaced") or []), entry]
    make_folder(path.parent)
    head = (
        f"# Pre-registration of {record['paper']} at {record['scale']} scale, written by `distrepro preregister` "
        "before the confirmatory runs.\n# Do not edit: reports compare each claim's hash and each frozen input's "
        "digest with this record and mark the verdicts post hoc when any changed since.\n"
    )
    text = head + yaml.safe_dump(record, sort_keys=False, allow_unicode=True, width=120, default_flow_style=None)
    return write_text(path.parent, path, text)


def load_record(path: Path, now: _dt.datetime | None = None) -> dict[str, Any] | None:
    """The record at ``path``, or None when the scale was never registered; a record whose fields do not hold what
    the writer gives them, or disagree with where it sits, is refused naming the field
    (:func:`distrepro.claims.record_check.check_record`; ``now``: the clock its date is checked against)."""
    if not path.is_file():
        return None
    return check_record(read_yaml(path), path, now)


def record_digest(path: Path) -> str:
    """The record's own SHA-256 (first 12 hex digits), the stamp a report prints."""
    return file_hash(path)[:12]


def exploratory_seeds(record: dict[str, Any], seeds: list[int]) -> list[int]:
    """The run seeds outside the record's confirmatory seeds: runs on them are exploratory, not the registered test."""
    confirmatory = set(record.get("seeds") or [])
    return sorted({int(s) for s in seeds} - confirmatory)


def registered_seeds(paper_file: Path | None, scale: str) -> tuple[list[int], Path] | None:
    """The confirmatory seeds of ``scale``'s record beside ``paper_file`` and the record's path, or None where the
    scale was never registered. ``reproduce`` runs them when no ``--seeds`` is given, so that the default session
    is the registered test itself (bit for bit the runs RESULTS.md reads), not exploratory seeds beside it."""
    if paper_file is None:
        return None
    path = record_path(paper_file, scale)
    record = load_record(path)
    return ([int(s) for s in record["seeds"]], path) if record is not None else None


def default_seeds(info: Any, scale: str, root: Path | None = None) -> list[int]:
    """From :data:`CONFIRMATORY_FIRST_SEED`, as many seeds as the arms' run configs at ``scale`` run (the most of
    any arm), so the registered n is the one the configs were sized for."""
    from distrepro.claims.papers import arm_config_path

    most = info.spec.setup.min_seeds
    for name, arm in info.spec.setup.arms.items():
        try:
            path = arm_config_path(info.path, name, arm.config, scale, root)
        except ConfigError:
            continue
        most = max(most, len(read_yaml(path).get("seeds") or []))
    return list(range(CONFIRMATORY_FIRST_SEED, CONFIRMATORY_FIRST_SEED + most))


def preregister(
    paper: str,
    scale: str,
    seeds: list[int] | None = None,
    looks: list[int] | None = None,
    replace: bool = False,
    root: Path | None = None,
    pilot: Callable[[str, Any, str, int], dict[str, Any]] | None = None,
    samples: int | None = None,
    post_hoc: bool = False,
    tracking_uri: str | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Build and write the record of ``paper`` at ``scale`` (the ``distrepro preregister`` command). ``pilot``
    (a :class:`distrepro.claims.pilot.PilotRequest`) plans n from a pilot's spread: the confirmatory seeds are then
    ``100 .. 100+n−1`` unless ``seeds`` are given, and the record keeps the plan. ``samples``: the hardware samples
    the sensitivity check will draw (``--samples``; default the paper's), frozen in the record. Seeds that runs of
    the paper at ``scale`` in the store (``tracking_uri``) already used are refused (:func:`refuse_used_seeds`)
    unless ``post_hoc``: the record then keeps those runs and every verdict it judges is post hoc."""
    from distrepro.claims.papers import UnknownPaperError, arms_at_scale, find_paper, known_papers
    from distrepro.claims.schema import TRAINING_SCALES, at_scale

    info = find_paper(paper, root)
    if info.spec is None or info.path is None:
        raise UnknownPaperError(paper, known_papers(root))
    available = arms_at_scale(info, scale, root) if scale in TRAINING_SCALES else None
    spec = at_scale(info.spec, scale, available)  # type: ignore[arg-type]
    path = record_path(info.path, scale)
    refuse_frozen(path, replace)  # before a pilot is read, not after
    default = default_seeds(info, scale, root)
    plan = pilot(paper, spec, scale, len(default)) if pilot is not None else None
    if plan is not None and not seeds:
        default = list(range(CONFIRMATORY_FIRST_SEED, CONFIRMATORY_FIRST_SEED + int(plan["n"])))
    record = build_record(
        paper, info.path, spec, scale, seeds or default, looks, pilot=plan, samples=samples, root=root
    )
    used = refuse_used_seeds(paper, scale, info.spec.setup.scale, record["seeds"], post_hoc, tracking_uri)
    if used:
        record["post_hoc_seeds"] = used
    return write_record(record, path, replace), record


def refuse_used_seeds(
    paper: str, scale: str, default_scale: str, seeds: list[int], post_hoc: bool, tracking_uri: str | None = None
) -> list[dict[str, Any]]:
    """The first run on each of ``seeds`` that ``paper``'s runs at ``scale`` in the store already used, as a
    record's ``post_hoc_seeds:`` keeps them (empty: none did); with any and not ``post_hoc``, a
    :class:`~distrepro.errors.ConfigError` naming them: a record written now would certify as registered in
    advance verdicts whose runs were already seen (:mod:`distrepro.claims.seed_history`)."""
    uses, uri = store_uses(paper, scale, default_scale, seeds, tracking_uri)
    if uses and not post_hoc:
        shown = "; ".join(u.text() for u in uses[:5]) + (f"; and {len(uses) - 5} more" if len(uses) > 5 else "")
        raise ConfigError(
            "preregister --seeds",
            None,
            f"seed(s) {', '.join(str(u.seed) for u in uses)} of {paper} at {scale} scale already ran before this "
            f"record ({shown}; in {uri}): a record names seeds no run has used yet. Choose unused seeds, or pass "
            "--post-hoc to register these knowingly (the record keeps those runs and every verdict it judges is "
            "post hoc)",
        )
    return [u.entry() for u in uses]
