"""The suite's recorded session times (``distrepro/orchestration/recorded_times.yaml``): an entry for every scale a
paper pre-registers, each with its machine, date and source, and a malformed file refused naming its field."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import yaml

from distrepro.claims.papers import known_papers
from distrepro.errors import ConfigError
from distrepro.orchestration.recorded_times import DATA_FILE, FIELDS, load_recorded

REPO = Path(__file__).resolve().parents[2]


def _registered() -> set[tuple[str, str]]:
    """(paper, scale) of every pre-registration record in the repository: the sessions a user can start."""
    found = set()
    for record in (REPO / "methods").glob("*/preregistration/*.yaml"):
        data = yaml.safe_load(record.read_text(encoding="utf-8"))
        found.add((str(data["paper"]), str(data["scale"])))
    return found


def test_every_registered_paper_and_scale_has_a_recorded_session() -> None:
    recorded = load_recorded()
    registered = _registered()
    assert registered, "no pre-registration record found"
    missing = sorted(registered - set(recorded))
    assert not missing, f"time each session and add it to {DATA_FILE.name}: {missing}"
    assert {paper for paper, _ in recorded} <= set(known_papers())  # no entry for a paper that is gone


def test_each_session_says_where_its_figure_comes_from() -> None:
    for (paper, scale), session in load_recorded().items():
        assert session.runs > 0 and session.wall_s > 0 and session.cpu_s > 0, (paper, scale)
        assert session.source.startswith(("BENCHMARKS.md", "CHANGELOG.md")), (paper, scale, session.source)
        assert session.date[:4].isdigit() and session.machine, (paper, scale)
        assert session.wall_for(2 * session.runs) == pytest.approx(2 * session.wall_s)


def test_the_data_file_ships_with_the_package() -> None:
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = data["tool"]["setuptools"]["package-data"]["distrepro"]
    assert str(DATA_FILE.relative_to(REPO / "distrepro")) in shipped


@pytest.mark.parametrize(
    ("entry", "field", "said"),
    [
        ({"wall_s": None}, "sessions.cadp.proxy", "missing wall_s"),
        ({"runs": 0}, "sessions.cadp.proxy.runs", "must be a positive number"),
        ({"runs": 2.5}, "sessions.cadp.proxy.runs", "must be a whole number"),
        ({"machine": ""}, "sessions.cadp.proxy.machine", "must be text"),
        ({"load": 3}, "sessions.cadp.proxy.load", "unknown field"),
    ],
)
def test_a_malformed_entry_is_refused_naming_the_file_and_field(
    tmp_path: Path, entry: dict[str, object], field: str, said: str
) -> None:
    good = {"runs": 30, "wall_s": 56, "cpu_s": 93, "machine": "m", "date": "2026-11-25", "commit": "c", "source": "s"}
    raw = {k: v for k, v in {**good, **entry}.items() if v is not None}  # None: the field left out
    path = tmp_path / "recorded_times.yaml"
    path.write_text(yaml.safe_dump({"sessions": {"cadp": {"proxy": raw}}}), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_recorded(path)
    assert caught.value.field == field and said in caught.value.message and str(path) in str(caught.value)
    assert set(FIELDS) == set(good)
