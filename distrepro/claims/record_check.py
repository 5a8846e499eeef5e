"""A pre-registration record checked before anything trusts it: the type and value of every field, and the fields
that must agree with where the record sits and with one another.

A record decides which runs a report judges, which seeds are confirmatory, the interval level of a sequential plan
and whether a verdict is post hoc, and the report stamps it as the test fixed before the runs
(:mod:`distrepro.claims.preregistration`). Taken on trust, a hand-edited, corrupted or copied record is printed as
valid: ``seeds: abc`` as "confirmatory seeds a-c", a date of 2099 that every run precedes, ``claims: [1, 2]`` as
every claim "added after registration". :func:`check_record` refuses such a record with one
:class:`~distrepro.errors.ConfigError` naming the file and the field:

* ``paper`` is the ``citation.id`` of the claims file beside the record's folder, ``scale`` the file's own name;
* ``date`` parses (to the second, or to the minute as older records wrote it) and is not in the future;
* ``seeds`` are distinct seed indices, ``n`` is their number, the ``sequential`` plan's last look is all of them
  and its boundary and level are the ones its looks give (a Pocock plan's level sets every verdict's interval);
* ``claims`` maps each claim id (a string) to its registered hash, kind and minimum seeds;
* the digests are SHA-256 hex, the commit a git commit, and the optional ``pilot:``, ``frozen:``, ``replaced:``
  and ``post_hoc_seeds:`` blocks have the shape their writers give them; a field no writer writes is refused.
"""

from __future__ import annotations

import datetime as _dt
import functools
import itertools
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeGuard

from distrepro.claims.frozen import KINDS
from distrepro.claims.sequential import ONE_SIDED_ALPHA, pocock_boundary, pocock_level
from distrepro.config.run_config import MAX_SEED_INDEX, MAX_SEEDS_GIVEN, read_yaml
from distrepro.errors import ConfigError

#: the fields every record has, in the order the writer puts them (a missing one is named in this order)
REQUIRED = ("paper", "scale", "date", "commit", "claims_file", "claims_sha256", "seeds", "n", "sequential", "claims")
OPTIONAL = ("pilot", "frozen", "replaced", "post_hoc_seeds")
SCALES = ("proxy", "mid", "gpu", "paper")
#: how far a record's date may lie ahead of this machine's clock (another machine wrote it, its clock a little ahead)
CLOCK_SKEW = _dt.timedelta(minutes=5)
#: a record's ``date``: to the second, so that a record written minutes after a run started reads as later
DATE_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
#: the date as records written before :data:`DATE_FORMAT` wrote it, to the minute
MINUTE_FORMAT = "%Y-%m-%dT%H:%MZ"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_COMMIT = re.compile(r"[0-9a-f]{7,40}( \+uncommitted claims file)?|unknown \(not a git checkout\)")
_CLAIM_KINDS = ("speedup", "final_metric", "relative_improvement", "convergence", "ordering", "non_inferiority")
_DECIDED_BY = ("measurement", "model_structure")
#: what each field of a claim's entry may hold beside ``sha256``/``kind``/``decided_by``/``min_seeds``
_ENTRY_FIELDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "claimed": ("a number or a [low, high] pair", lambda v: _number(v) or (_list_of(v, _number) and len(v) == 2)),
    "margin": ("a number", lambda v: _number(v)),
    "margin_kind": ("abs or rel", lambda v: v in ("abs", "rel")),
    "accept": ("a mapping", lambda v: isinstance(v, dict)),
    "metric": ("a metric name", lambda v: isinstance(v, str) and bool(v)),
    "direction": ("max or min", lambda v: v in ("max", "min")),
    "form": ("a string", lambda v: isinstance(v, str)),
    "measure": ("a string", lambda v: isinstance(v, str)),
    "target": ("a mapping", lambda v: isinstance(v, dict)),
    "arms": ("a list of arm names", lambda v: _list_of(v, lambda a: isinstance(a, str) and bool(a))),
    "regime": ("a mapping of condition id to its thresholds", lambda v: _str_keyed(v, dict)),
}


def record_time(value: Any) -> _dt.datetime | None:
    """A record's ``date`` as UTC, or None when it is none: a string to the second or, as older records wrote
    it, to the minute; or the timestamp YAML makes of an unquoted one (with its zone: a naive time is no instant)."""
    if isinstance(value, _dt.datetime):
        return value.astimezone(_dt.UTC) if value.tzinfo is not None else None
    if not isinstance(value, str):
        return None
    for fmt in (DATE_FORMAT, MINUTE_FORMAT):
        try:
            return _dt.datetime.strptime(value, fmt).replace(tzinfo=_dt.UTC)
        except ValueError:
            continue
    return None


def latest_time(value: Any) -> _dt.datetime | None:
    """The last instant ``value`` (a record's ``date``) may stand for: the end of its minute for a date written to
    the minute, so a run started in that minute is never certified as later than the record."""
    when = record_time(value)
    if when is not None and isinstance(value, str) and _is_minute(value):
        return when + _dt.timedelta(seconds=59)
    return when


def _is_minute(text: str) -> bool:
    try:
        _dt.datetime.strptime(text, MINUTE_FORMAT)
    except ValueError:
        return False
    return True


def _int(value: Any) -> TypeGuard[int]:
    """A whole number, not a boolean (YAML's ``true`` is an ``int`` to Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _list_of(value: Any, item: Callable[[Any], bool]) -> bool:
    return isinstance(value, list) and all(item(v) for v in value)


def _str_keyed(value: Any, kind: type) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, kind) for k, v in value.items())


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Record:
    """One record's checks; each refusal names the file and the dotted field."""

    def __init__(self, data: dict[str, Any], path: Path) -> None:
        self.data, self.path = data, path

    def fail(self, field: str, why: str) -> ConfigError:
        return ConfigError(self.path, field, why)

    def require(self, ok: bool, field: str, what: str, value: Any) -> None:
        if not ok:
            raise self.fail(field, f"must be {what}, got {_shown(value)}")

    def keys(self) -> None:
        for key in REQUIRED:
            if key not in self.data:
                raise self.fail(key, "missing from the pre-registration record")
        unknown = [str(k) for k in self.data if k not in REQUIRED + OPTIONAL]
        if unknown:
            known = ", ".join(REQUIRED + OPTIONAL)
            raise self.fail(unknown[0], f"not a field of a pre-registration record (its fields: {known})")

    def where_it_sits(self) -> None:
        """``scale`` is the file's name; ``paper`` is the paper of the claims file beside the record's folder."""
        scale, paper, name = self.data["scale"], self.data["paper"], self.data["claims_file"]
        self.require(scale in SCALES, "scale", f"one of {', '.join(SCALES)}", scale)
        if scale != self.path.stem:
            raise self.fail("scale", f"{scale!r} is not the scale of the file ({self.path.name}: {self.path.stem!r})")
        self.require(isinstance(paper, str) and bool(paper), "paper", "a paper id", paper)
        plain = (
            isinstance(name, str) and bool(name) and "/" not in name and "\\" not in name and name not in (".", "..")
        )
        self.require(plain, "claims_file", "a file name beside the record's folder (paper.yaml)", name)
        claims_file = self.path.parent.parent / name
        if not claims_file.is_file():
            raise self.fail("claims_file", f"{name!r}: no such file in {self.path.parent.parent}")
        stat = claims_file.stat()
        written = _citation_id(claims_file, stat.st_mtime_ns, stat.st_size)
        if written != paper:
            raise self.fail("paper", f"{paper!r} is not the paper of {claims_file} (citation.id {written!r})")

    def date(self, now: _dt.datetime | None) -> None:
        value = self.data["date"]
        when = record_time(value)
        if when is None:
            raise self.fail("date", f"must be a UTC date and time such as 2026-11-27T01:00:00Z, got {_shown(value)}")
        now = now or _dt.datetime.now(_dt.UTC)
        if when > now + CLOCK_SKEW:
            raise self.fail("date", f"{when.strftime(DATE_FORMAT)} is in the future (now {now.strftime(DATE_FORMAT)})")

    def digests(self) -> None:
        commit, digest = self.data["commit"], self.data["claims_sha256"]
        self.require(isinstance(commit, str) and bool(_COMMIT.fullmatch(commit)), "commit", "a git commit", commit)
        self.require(isinstance(digest, str) and bool(_HEX64.fullmatch(digest)), "claims_sha256", "a SHA-256", digest)

    def seeds(self) -> list[int]:
        seeds = self.data["seeds"]
        self.require(isinstance(seeds, list), "seeds", "a list of seed indices such as [100, 101, 102]", seeds)
        if not seeds:
            raise self.fail("seeds", "empty: a record registers at least one confirmatory seed")
        if len(seeds) > MAX_SEEDS_GIVEN:
            raise self.fail("seeds", f"{len(seeds)} seeds, more than the {MAX_SEEDS_GIVEN} a campaign may run")
        seen: set[int] = set()
        for i, seed in enumerate(seeds):
            what = f"a seed index (a whole number 0-{MAX_SEED_INDEX})"
            self.require(_int(seed) and 0 <= seed <= MAX_SEED_INDEX, f"seeds[{i}]", what, seed)
            if seed in seen:
                raise self.fail(f"seeds[{i}]", f"seed {seed} is registered twice")
            seen.add(seed)
        n = self.data["n"]
        self.require(_int(n) and n == len(seeds), "n", f"the number of seeds ({len(seeds)})", n)
        return seeds

    def sequential(self, count: int) -> None:
        plan = self.data["sequential"]
        self.require(isinstance(plan, dict), "sequential", "a mapping (design: fixed or pocock)", plan)
        design = plan.get("design")
        if design == "fixed":
            self.fields(plan, "sequential", ("design", "n", "interval"))
            self.require(
                plan["n"] == count and _int(plan["n"]), "sequential.n", f"the number of seeds ({count})", plan["n"]
            )
            self.require(plan["interval"] == 0.95, "sequential.interval", "0.95 for a fixed design", plan["interval"])
            return
        self.require(design == "pocock", "sequential.design", "fixed or pocock", design)
        self.fields(plan, "sequential", ("design", "looks", "alpha_one_sided", "boundary_z", "interval"))
        looks = plan["looks"]
        rising = _list_of(looks, _int) and looks and looks[0] >= 2 and all(b > a for a, b in itertools.pairwise(looks))
        self.require(bool(rising), "sequential.looks", "increasing seed counts of at least 2", looks)
        self.require(looks[-1] == count, "sequential.looks", f"a plan whose last look is all {count} seeds", looks)
        alpha = plan["alpha_one_sided"]
        self.require(alpha == ONE_SIDED_ALPHA, "sequential.alpha_one_sided", str(ONE_SIDED_ALPHA), alpha)
        for key, value in zip(("boundary_z", "interval"), _pocock(tuple(looks)), strict=True):
            got = plan[key]
            close = _number(got) and abs(got - value) < 1e-4
            self.require(close, f"sequential.{key}", f"{value} (what looks {looks} give)", got)

    def fields(self, block: dict[str, Any], where: str, names: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
        """``block`` has every one of ``names`` and nothing beside them and ``optional``."""
        for name in names:
            if name not in block:
                raise self.fail(f"{where}.{name}", "missing")
        extra = [str(k) for k in block if k not in names + optional]
        if extra:
            raise self.fail(f"{where}.{extra[0]}", f"not a field of {where} ({', '.join(names + optional)})")

    def claims(self) -> None:
        claims = self.data["claims"]
        what = "a mapping of claim id to its registered entry (sha256, kind, decided_by, min_seeds)"
        self.require(isinstance(claims, dict), "claims", what, claims)
        for cid, entry in claims.items():
            self.require(isinstance(cid, str) and bool(cid), "claims", "keyed by claim ids (strings)", cid)
            where = f"claims.{cid}"
            self.require(isinstance(entry, dict), where, "a mapping (sha256, kind, decided_by, min_seeds)", entry)
            self.fields(entry, where, ("sha256", "kind", "decided_by", "min_seeds"), tuple(_ENTRY_FIELDS))
            sha, kind, by, least = entry["sha256"], entry["kind"], entry["decided_by"], entry["min_seeds"]
            self.require(isinstance(sha, str) and bool(_HEX64.fullmatch(sha)), f"{where}.sha256", "a SHA-256", sha)
            self.require(kind in _CLAIM_KINDS, f"{where}.kind", f"one of {', '.join(_CLAIM_KINDS)}", kind)
            self.require(by in _DECIDED_BY, f"{where}.decided_by", " or ".join(_DECIDED_BY), by)
            self.require(_int(least) and least >= 1, f"{where}.min_seeds", "a whole number of at least 1", least)
            for key, (what_it_is, ok) in _ENTRY_FIELDS.items():
                if key in entry:
                    self.require(ok(entry[key]), f"{where}.{key}", what_it_is, entry[key])

    def pilot(self) -> None:
        """``pilot:`` (how a pilot chose n), as the report prints it: n, the cap, one mapping per claim, its seeds."""
        if "pilot" not in self.data:
            return
        self.require(isinstance(self.data["pilot"], dict), "pilot", "a mapping", self.data["pilot"])
        pilot: dict[str, Any] = self.data["pilot"]
        n, cap, claims, seeds = pilot.get("n"), pilot.get("max_seeds"), pilot.get("claims", {}), pilot.get("seeds", [])
        self.require(_int(n) and n >= 1, "pilot.n", "a whole number of seeds", n)
        self.require(_int(cap) and cap >= 2, "pilot.max_seeds", "a whole number of at least 2", cap)
        self.require(_str_keyed(claims, dict), "pilot.claims", "a mapping per claim id", claims)
        self.require(_list_of(seeds, _int), "pilot.seeds", "a list of seed indices", seeds)

    def frozen(self) -> None:
        """``frozen:`` (the inputs' digests by kind, the hardware samples, the commit, the dirty files)."""
        if "frozen" not in self.data:
            return
        block = self.data["frozen"]
        self.require(isinstance(block, dict), "frozen", "a mapping (inputs, samples, commit, dirty)", block)
        self.fields(block, "frozen", ("inputs", "samples", "commit", "dirty"))
        inputs = block["inputs"]
        self.require(_str_keyed(inputs, dict), "frozen.inputs", "a mapping of kind to file digests", inputs)
        for kind, files in inputs.items():
            self.require(kind in KINDS, "frozen.inputs", f"keyed by {', '.join(KINDS)}", kind)
            good = all(isinstance(k, str) and isinstance(v, str) and _HEX64.fullmatch(v) for k, v in files.items())
            self.require(good, f"frozen.inputs.{kind}", "a mapping of file name to SHA-256", files)
        samples, commit, dirty = block["samples"], block["commit"], block["dirty"]
        self.require(_int(samples) and samples >= 1, "frozen.samples", "a whole number of samples", samples)
        self.require(isinstance(commit, str), "frozen.commit", "a git commit", commit)
        self.require(_list_of(dirty, lambda d: isinstance(d, str)), "frozen.dirty", "a list of file names", dirty)

    def history(self) -> None:
        """``replaced:`` (when, the SHA-256 of the record replaced, its date) and ``post_hoc_seeds:`` (the runs on
        the registered seeds before the record, when ``preregister --post-hoc`` wrote it)."""
        for key, names in (
            ("replaced", ("date", "sha256", "registered")),
            ("post_hoc_seeds", ("seed", "run", "started")),
        ):
            if key not in self.data:
                continue
            items = self.data[key]
            self.require(isinstance(items, list) and bool(items), key, "a non-empty list", items)
            for i, item in enumerate(items):
                where = f"{key}[{i}]"
                self.require(isinstance(item, dict), where, f"a mapping ({', '.join(names)})", item)
                self.fields(item, where, names, ("seeds",) if key == "replaced" else ())
                if key == "replaced" and "seeds" in item:
                    good = _list_of(item["seeds"], _int)
                    self.require(good, f"{where}.seeds", "a list of seed indices", item["seeds"])
                when = item["date"] if key == "replaced" else item["started"]
                field = f"{where}.{'date' if key == 'replaced' else 'started'}"
                self.require(record_time(when) is not None, field, "a UTC date and time", when)
            if key == "post_hoc_seeds":
                for i, item in enumerate(items):
                    self.require(_int(item["seed"]), f"{key}[{i}].seed", "a seed index", item["seed"])


@functools.lru_cache(maxsize=64)
def _citation_id(path: Path, _mtime_ns: int, _size: int) -> Any:
    """``citation.id`` of the claims file ``path`` as it is now (keyed by its time and size: a report reads each record
    several times, and a paper.yaml is re-read only once it changed)."""
    citation = read_yaml(path).get("citation")
    return citation.get("id") if isinstance(citation, dict) else None


@functools.lru_cache(maxsize=32)
def _pocock(looks: tuple[int, ...]) -> tuple[float, float]:
    """The boundary and the level a record writes for ``looks`` (rounded as :func:`build_record` rounds them)."""
    return round(pocock_boundary(looks), 4), round(pocock_level(looks), 4)


def check_record(data: dict[str, Any], path: Path, now: _dt.datetime | None = None) -> dict[str, Any]:
    """``data``, the record read from ``path``, if every field holds what the writer gives it; else the first
    problem as a :class:`~distrepro.errors.ConfigError` naming ``path`` and the field. ``now``: the clock the date
    is checked against (default: this machine's)."""
    record = _Record(data, path)
    record.keys()
    record.where_it_sits()
    record.date(now)
    record.digests()
    count = len(record.seeds())
    record.sequential(count)
    record.claims()
    record.pilot()
    record.frozen()
    record.history()
    return data
