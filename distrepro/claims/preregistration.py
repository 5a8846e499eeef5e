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
(:func:`standing`) when its claim changed or is new (:func:`check_claims`), when the record is newer than the first
confirmatory run it judges, when it replaced an earlier record (``--replace`` keeps a ``replaced:`` history), or when
a frozen input changed since. A record without ``frozen:`` (written before it existed) cannot certify those inputs:
its verdicts are marked *not frozen*.

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
    the error bands, the code (:func:`distrepro.claims.frozen.file_digests`)."""
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
    covered = [p for group in files.values() for p in group] + [package / s for s in frozen_inputs.CODE_PACKAGES]
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


#: a record's ``date``: to the second, so that a record written minutes after a run started reads as later
DATE_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def record_time(text: Any) -> _dt.datetime | None:
    """A record's ``date`` (with or without seconds: older records stop at the minute) as UTC, or None."""
    for fmt in (DATE_FORMAT, "%Y-%m-%dT%H:%MZ"):
        try:
            return _dt.datetime.strptime(str(text), fmt).replace(tzinfo=_dt.UTC)
        except ValueError:
            continue
    return None


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
        old = load_record(path) or {}
        entry = {
            "date": _dt.datetime.now(_dt.UTC).strftime(DATE_FORMAT),
            "sha256": file_hash(path),
            "registered": str(old.get("date", "?")),
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


def load_record(path: Path) -> dict[str, Any] | None:
    """The record at ``path``, or None when the scale was never registered."""
    if not path.is_file():
        return None
    data = read_yaml(path)
    for key in ("paper", "scale", "date", "claims_sha256", "claims", "seeds"):
        if key not in data:
            raise ConfigError(path, key, "missing from the pre-registration record")
    return data


def record_digest(path: Path) -> str:
    """The record's own SHA-256 (first 12 hex digits), the stamp a report prints."""
    return file_hash(path)[:12]


@dataclass(frozen=True)
class ClaimStatus:
    """How one claim judged at a registered scale relates to the record."""

    claim_id: str
    status: str  # "registered", "edited after registration", "added after registration"

    @property
    def post_hoc(self) -> bool:
        return self.status != "registered"


def check_claims(record: dict[str, Any], paper_file: Path, claim_ids: list[str]) -> list[ClaimStatus]:
    """Each of ``claim_ids`` (the claims a report judges at the record's scale) against the record: its hash as
    written now in ``paper_file`` equals the registered one, or the claim was edited or added since."""
    raw = raw_claims(paper_file)
    registered = record.get("claims") or {}
    out = []
    for cid in claim_ids:
        if cid not in registered:
            out.append(ClaimStatus(cid, "added after registration"))
        elif cid in raw and claim_hash(raw[cid]) != registered[cid].get("sha256"):
            out.append(ClaimStatus(cid, "edited after registration"))
        else:
            out.append(ClaimStatus(cid, "registered"))
    return out


#: what a record without a ``frozen:`` block (written before it existed) leaves uncertified
NOT_FROZEN = (
    "this record does not freeze setup, profiles, code, the emulator's error band or the hardware samples (written "
    "before records froze them): the verdicts rest on its claims and seeds only"
)


@dataclass(frozen=True)
class Standing:
    """What a record certifies of the verdicts it judges: per claim, why its verdict is post hoc (absent: it is
    not); the reasons that hold for every claim of the record; the inputs changed since; and, for a record without
    a ``frozen:`` block, :data:`NOT_FROZEN` (a weaker flag: the inputs it does not freeze cannot be certified)."""

    post_hoc: dict[str, str]
    record_reasons: list[str]
    changed: list[str]
    not_frozen: str = ""


def standing(
    record: dict[str, Any],
    claims: list[ClaimStatus],
    inputs_now: dict[str, dict[str, str]] | None,
    first_run: _dt.datetime | None = None,
    samples: int | None = None,
) -> Standing:
    """Which of a record's verdicts are post hoc, and why (:mod:`distrepro.claims.preregistration`'s four rules):

    * the claim was edited or added since the record (``claims``, from :func:`check_claims`);
    * the record is newer than the runs it judges: its ``date`` is after ``first_run``, the start of the first
      confirmatory run at its scale;
    * the record replaced an earlier one (its ``replaced:`` history);
    * an input it froze changed since (``inputs_now``, :func:`frozen_now`), or the sensitivity check drew another
      number of hardware samples (``samples``, None when no check ran).

    A record without ``frozen:`` certifies neither the inputs nor the samples: its verdicts are *not frozen*
    (unless another rule makes them post hoc)."""
    reasons: list[str] = []
    history = record.get("replaced") or []
    if history:
        last = history[-1]
        reasons.append(
            f"the record replaced an earlier one (registered {last.get('registered', '?')}, sha256 "
            f"`{str(last.get('sha256', '?'))[:12]}`) on {last.get('date', '?')}"
        )
    registered = record_time(record.get("date"))
    if first_run is not None and registered is not None and registered > first_run:
        reasons.append(
            f"the record ({record.get('date')}) is newer than the first confirmatory run it judges "
            f"(started {first_run.strftime(DATE_FORMAT)})"
        )
    block = record.get("frozen")
    changed: list[str] = []
    if isinstance(block, dict):
        changed = frozen_inputs.changed(block.get("inputs") or {}, inputs_now or {}) if inputs_now is not None else []
        if samples is not None and block.get("samples") is not None and int(block["samples"]) != int(samples):
            changed.append(f"hardware samples: {block['samples']} registered, {samples} drawn")
        if changed:
            reasons.append("changed since the record: " + ", ".join(changed))
    per_claim = {}
    for status in claims:
        why = ([f"claim {status.status}"] if status.post_hoc else []) + reasons
        if why:
            per_claim[status.claim_id] = "; ".join(why)
    return Standing(per_claim, reasons, changed, "" if isinstance(block, dict) else NOT_FROZEN)


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
) -> tuple[Path, dict[str, Any]]:
    """Build and write the record of ``paper`` at ``scale`` (the ``distrepro preregister`` command). ``pilot``
    (a :class:`distrepro.claims.pilot.PilotRequest`) plans n from a pilot's spread: the confirmatory seeds are then
    ``100 .. 100+n−1`` unless ``seeds`` are given, and the record keeps the plan. ``samples``: the hardware samples
    the sensitivity check will draw (``--samples``; default the paper's), frozen in the record."""
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
    return write_record(record, path, replace), record
