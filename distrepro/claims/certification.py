"""What a pre-registration record certifies of the verdicts it judges, and where it cannot.

A verdict at a registered scale is the registered test only if nothing that decides it was chosen after its data
were seen. Per claim, :func:`check_claims` compares the claim's hash as written now with the record's; per record,
:func:`standing` collects the reasons that make every verdict of the record *post hoc* (a record dated after the
first run on its seeds or registered ``--post-hoc`` on seeds runs had used, a replaced record, a frozen input
changed since), the weaker *not frozen* flag of a record without a ``frozen:`` block, and what could not be
checked at all, so that a report says so instead of certifying (:mod:`distrepro.report.preregistration_section`).
The record itself is checked before any of this reads it (:mod:`distrepro.claims.record_check`).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distrepro.claims import frozen as frozen_inputs
from distrepro.claims.preregistration import claim_hash, raw_claims
from distrepro.claims.record_check import DATE_FORMAT, latest_time
from distrepro.claims.seed_history import SeedUse


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
    not); the reasons that hold for every claim of the record; the inputs changed since; for a record without
    a ``frozen:`` block, :data:`NOT_FROZEN` (a weaker flag: the inputs it does not freeze cannot be certified); and
    what could not be checked (``unchecked``: the report then says so instead of certifying)."""

    post_hoc: dict[str, str]
    record_reasons: list[str]
    changed: list[str]
    not_frozen: str = ""
    unchecked: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # said, but no reason for post hoc (a fresh-seed replacement)


def _shown_uses(uses: list[dict[str, Any]]) -> str:
    shown = [f"seed {u.get('seed')}: run {str(u.get('run'))[:12]} started {u.get('started')}" for u in uses[:3]]
    return "; ".join(shown) + (f"; and {len(uses) - 3} more" if len(uses) > 3 else "")


def _late(record: dict[str, Any], first_run: _dt.datetime | SeedUse | None) -> list[str]:
    """Why the record is not earlier than the runs it judges: registered ``--post-hoc`` on seeds runs had used
    (its ``post_hoc_seeds:``), or dated after ``first_run``, the first run on its seeds at its scale (to the end of
    the minute for a date written to the minute)."""
    reasons = []
    if record.get("post_hoc_seeds"):
        reasons.append(
            "the record was registered post hoc (`preregister --post-hoc`) on seeds runs had used before it ("
            + _shown_uses(record["post_hoc_seeds"])
            + ")"
        )
    use = first_run if isinstance(first_run, SeedUse) else None
    started = use.started if use is not None else first_run
    registered = latest_time(record.get("date"))
    if isinstance(started, _dt.datetime) and registered is not None and registered > started:
        which = f"run {use.run_id[:12]} on seed {use.seed}, " if use is not None else ""
        reasons.append(
            f"the record ({record.get('date')}) is newer than the first confirmatory run it judges "
            f"({which}started {started.strftime(DATE_FORMAT)})"
        )
    return reasons


def standing(
    record: dict[str, Any],
    claims: list[ClaimStatus],
    inputs_now: dict[str, dict[str, str]] | None,
    first_run: _dt.datetime | SeedUse | None = None,
    samples: int | None = None,
    unchecked: list[str] | None = None,
) -> Standing:
    """Which of a record's verdicts are post hoc, and why (:mod:`distrepro.claims.preregistration`'s four rules):

    * the claim was edited or added since the record (``claims``, from :func:`check_claims`);
    * the record is newer than the runs it judges: its ``date`` is after ``first_run`` (the first run on its seeds
      at its scale, :func:`distrepro.claims.seed_history.first_uses`: superseded and failed runs count, they were
      seen), or it was registered ``--post-hoc`` on seeds runs had used;
    * the record replaced an earlier one (its ``replaced:`` history), unless on seeds none of the records it
      replaced registered (:func:`fresh_replacement`: then a note, not a reason);
    * an input it froze changed since (``inputs_now``, :func:`frozen_now`), or the sensitivity check drew another
      number of hardware samples (``samples``, None when no check ran).

    A record without ``frozen:`` certifies neither the inputs nor the samples: its verdicts are *not frozen*
    (unless another rule makes them post hoc). ``unchecked``: what the caller could not compare (runs that record
    no start), kept so the report says so rather than certify."""
    reasons: list[str] = []
    notes: list[str] = []
    history = record.get("replaced") or []
    if history:
        last = history[-1]
        said = (
            f"the record replaced an earlier one (registered {last.get('registered', '?')}, sha256 "
            f"`{str(last.get('sha256', '?'))[:12]}`) on {last.get('date', '?')}"
        )
        if fresh_replacement(record):
            fresh = ", on seeds no earlier record registered: a new confirmatory test, the earlier runs its pilot"
            notes.append(said + fresh)
        else:
            reasons.append(said)
    reasons += _late(record, first_run)
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
    not_frozen = "" if isinstance(block, dict) else NOT_FROZEN
    return Standing(per_claim, reasons, changed, not_frozen, list(unchecked or []), notes)


def fresh_replacement(record: dict[str, Any]) -> bool:
    """Whether a replaced record is a new confirmatory test rather than a choice made after its data were seen:
    every record it replaced says which seeds it registered, and none of them is among this record's seeds. The
    earlier runs may have shaped the new record's margins or inputs, but the new seeds' runs are independent of
    that choice, as a pilot's are of the confirmation it plans (a record dated after the first run on its own
    seeds is still post hoc, :func:`_late`). Re-registering on the same seeds stays post hoc."""
    history = record.get("replaced") or []
    if not history or any("seeds" not in entry for entry in history):
        return False
    used = {int(s) for entry in history for s in entry["seeds"]}
    return bool(record.get("seeds")) and not used & {int(s) for s in record["seeds"]}
