"""A pre-registration record is checked before it is trusted: each field a hostile or careless edit can break is
refused with the file and the field named (issue 47), and the records the writer and older versions wrote load."""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml

from distrepro.claims.preregistration import build_record, load_record, record_path, write_record
from distrepro.claims.record_check import CLOCK_SKEW, latest_time, record_time
from distrepro.claims.schema import at_scale, load_paper_file
from distrepro.errors import ConfigError

PAPER = {
    "kind": "reproduction",
    "citation": {"id": "checked", "title": "A paper whose record is checked"},
    "setup": {"scale": "proxy", "min_seeds": 2, "baseline": "base"},
    "claims": [
        {
            "id": "better",
            "kind": "ordering",
            "arms": ["new", "base"],
            "metric": "final/val_accuracy",
            "direction": "max",
            "margin": 0.005,
            "source": {"kind": "text", "quote": "better"},
            "evidence": "reconstructed",
        }
    ],
}
NOW = dt.datetime(2026, 11, 27, 1, 0, tzinfo=dt.UTC)


@pytest.fixture
def record_file(tmp_path: Path) -> Path:
    """A record as ``distrepro preregister`` writes it (seeds 100-102, fixed n), beside its paper.yaml."""
    paper_file = tmp_path / "checked" / "paper.yaml"
    paper_file.parent.mkdir()
    paper_file.write_text(yaml.safe_dump(PAPER, sort_keys=False))
    spec = at_scale(load_paper_file(paper_file), "proxy")
    record = build_record("checked", paper_file, spec, "proxy", [100, 101, 102], now=NOW)
    return write_record(record, record_path(paper_file, "proxy"))


def _edit(path: Path, change: Any) -> Path:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _set(key: str, value: Any) -> Any:
    def change(data: dict[str, Any]) -> None:
        target = data
        *parents, last = key.split("/")
        for part in parents:
            target = target[part]
        target[last] = copy.deepcopy(value)

    return change


SHA = "0" * 64
#: (edit, the field named, what the line says): each a record a report or ``reproduce`` used to take on trust
BROKEN = [
    ("seeds-abc", _set("seeds", "abc"), "seeds", "list of seed indices", "got 'abc'"),
    ("seeds-bool", _set("seeds", [100, True, 102]), "seeds[1]", "a seed index", "got True"),
    ("seeds-negative", _set("seeds", [-1, 101, 102]), "seeds[0]", "a seed index", "got -1"),
    ("seeds-twice", _set("seeds", [100, 100, 102]), "seeds[1]", "seed 100 is registered twice", ""),
    ("seeds-empty", _set("seeds", []), "seeds", "empty", ""),
    ("n-not-the-seeds", _set("n", 99), "n", "the number of seeds (3)", "got 99"),
    ("plan-n-not-the-seeds", _set("sequential/n", 5), "sequential.n", "the number of seeds (3)", "got 5"),
    ("fixed-level", _set("sequential/interval", 0.5), "sequential.interval", "0.95", "got 0.5"),
    ("design-unknown", _set("sequential/design", "bayes"), "sequential.design", "fixed or pocock", ""),
    ("date-not-a-date", _set("date", "not-a-date"), "date", "UTC date and time", "got 'not-a-date'"),
    ("date-2099", _set("date", "2099-01-01T00:00:00Z"), "date", "2099-01-01T00:00:00Z is in the future", ""),
    ("date-a-day", _set("date", dt.date(2026, 1, 1)), "date", "UTC date and time", ""),
    ("date-number", _set("date", 20260101), "date", "UTC date and time", "got 20260101"),
    ("paper-of-another", _set("paper", "other"), "paper", "'other' is not the paper of", "citation.id 'checked'"),
    ("scale-of-another", _set("scale", "mid"), "scale", "'mid' is not the scale of the file", "proxy.yaml"),
    ("scale-unknown", _set("scale", "huge"), "scale", "one of proxy, mid, gpu, paper", ""),
    ("claims-a-list", _set("claims", [1, 2]), "claims", "mapping of claim id", "got [1, 2]"),
    ("claims-id-a-number", _set("claims", {1: {}}), "claims", "keyed by claim ids (strings)", "got 1"),
    ("claim-hash", _set("claims/better/sha256", "abc"), "claims.better.sha256", "a SHA-256", "got 'abc'"),
    ("claim-kind", _set("claims/better/kind", "magic"), "claims.better.kind", "one of speedup", ""),
    ("claim-min-seeds", _set("claims/better/min_seeds", 0), "claims.better.min_seeds", "at least 1", "got 0"),
    ("claim-margin", _set("claims/better/margin", "wide"), "claims.better.margin", "a number", "got 'wide'"),
    ("claim-field", _set("claims/better/tolerance", 1), "claims.better.tolerance", "not a field of", ""),
    ("claims-hash", _set("claims_sha256", "abc"), "claims_sha256", "a SHA-256", ""),
    ("claims-file-outside", _set("claims_file", "../paper.yaml"), "claims_file", "a file name", ""),
    ("commit", _set("commit", 5), "commit", "a git commit", "got 5"),
    ("field-unknown", _set("verdicts", "all PASS"), "verdicts", "not a field of a pre-registration record", ""),
    ("frozen-samples", _set("frozen/samples", "abc"), "frozen.samples", "whole number", "got 'abc'"),
    ("frozen-digest", _set("frozen/inputs/paper.yaml", {"x": "y"}), "frozen.inputs.paper.yaml", "SHA-256", ""),
    ("frozen-kind", _set("frozen/inputs/weights", {}), "frozen.inputs", "keyed by paper.yaml", "got 'weights'"),
    ("replaced-date", _set("replaced", [{"date": "x", "sha256": SHA, "registered": "?"}]), "replaced[0].date", "", ""),
    (
        "post-hoc-seed",
        _set("post_hoc_seeds", [{"seed": "a", "run": "r", "started": "2026-01-01T00:00Z"}]),
        "post_hoc_seeds[0].seed",
        "a seed index",
        "got 'a'",
    ),
]


@pytest.mark.parametrize(("change", "field", "says", "got"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_a_broken_record_is_refused_naming_the_file_and_the_field(
    record_file: Path, change: Any, field: str, says: str, got: str
) -> None:
    _edit(record_file, change)
    with pytest.raises(ConfigError) as refused:
        load_record(record_file)
    line = str(refused.value)
    assert refused.value.source == str(record_file) and "\n" not in line
    assert refused.value.field == field, line
    assert says in line and got in line, line


@pytest.mark.smoke
def test_the_written_record_loads_and_a_missing_field_is_named(record_file: Path) -> None:
    record = load_record(record_file)
    assert record is not None and record["seeds"] == [100, 101, 102] and record["n"] == 3
    _edit(record_file, lambda d: d.pop("n"))
    with pytest.raises(ConfigError, match="field 'n': missing from the pre-registration record"):
        load_record(record_file)


def test_a_pocock_plan_must_carry_the_level_its_looks_give(record_file: Path) -> None:
    """A Pocock plan's ``interval`` is the level every verdict of the scale is judged at: an edited one would narrow
    every interval, so it must be the one the looks give (as must the boundary)."""
    paper_file = record_file.parent.parent / "paper.yaml"
    spec = at_scale(load_paper_file(paper_file), "proxy")
    record = build_record("checked", paper_file, spec, "proxy", list(range(100, 110)), looks=[5, 10], now=NOW)
    write_record(record, record_file, replace=True)
    assert load_record(record_file)["sequential"]["design"] == "pocock"
    for key, value, field in (
        ("interval", 0.5, "sequential.interval"),
        ("boundary_z", 1.0, "sequential.boundary_z"),
        ("looks", [5, 9], "sequential.looks"),
        ("looks", [10, 5], "sequential.looks"),
        ("alpha_one_sided", 0.2, "sequential.alpha_one_sided"),
    ):
        good = yaml.safe_load(record_file.read_text())
        _edit(record_file, _set(f"sequential/{key}", value))
        with pytest.raises(ConfigError, match=f"field '{field}'"):
            load_record(record_file)
        record_file.write_text(yaml.safe_dump(good, sort_keys=False))
    assert load_record(record_file) is not None


def test_dates_as_older_records_and_unquoted_yaml_write_them_load(record_file: Path) -> None:
    """To the minute (records before seconds) and an unquoted timestamp (which YAML reads as a datetime) load; a date
    a little ahead of this clock (another machine's) is within :data:`CLOCK_SKEW`, a later one is not."""
    _edit(record_file, _set("date", "2026-11-27T02:11Z"))
    assert load_record(record_file) is not None
    record_file.write_text(record_file.read_text().replace("date: 2026-11-27T02:11Z", "date: 2026-11-27T02:11:00Z"))
    assert isinstance(yaml.safe_load(record_file.read_text())["date"], dt.datetime)
    assert load_record(record_file) is not None
    registered = dt.datetime(2026, 11, 27, 2, 11, tzinfo=dt.UTC)
    assert load_record(record_file, now=registered - CLOCK_SKEW + dt.timedelta(seconds=1)) is not None
    with pytest.raises(ConfigError, match="in the future"):
        load_record(record_file, now=registered - CLOCK_SKEW - dt.timedelta(seconds=1))


def test_a_date_to_the_minute_stands_for_the_whole_minute() -> None:
    """A run started in the record's minute may have started before it: the record is taken at the minute's end."""
    assert record_time("2026-11-27T02:11Z") == dt.datetime(2026, 11, 27, 2, 11, tzinfo=dt.UTC)
    assert latest_time("2026-11-27T02:11Z") == dt.datetime(2026, 11, 27, 2, 11, 59, tzinfo=dt.UTC)
    assert latest_time("2026-11-27T02:11:05Z") == dt.datetime(2026, 11, 27, 2, 11, 5, tzinfo=dt.UTC)
    assert record_time("2026-11-27") is None and record_time(dt.datetime(2026, 1, 1)) is None  # no time, no zone


def test_a_refused_record_can_still_be_replaced(record_file: Path) -> None:
    """``--replace`` is how a broken record is mended: writing over it does not need to read it."""
    _edit(record_file, _set("seeds", "abc"))
    paper_file = record_file.parent.parent / "paper.yaml"
    spec = at_scale(load_paper_file(paper_file), "proxy")
    write_record(build_record("checked", paper_file, spec, "proxy", [100, 101], now=NOW), record_file, replace=True)
    mended = load_record(record_file)
    assert mended is not None and mended["seeds"] == [100, 101] and mended["replaced"][0]["registered"] == "?"
