"""Rebuilding the runs of the timing claims: one build per config, the seeds of a config told apart by their seed
line alone (:class:`distrepro.sensitivity.collect.MlflowJobs`), and each arm's runs picked once (no training)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pytest
import yaml

from distrepro.sensitivity import collect as C

CONFIG = {"name": "arm", "seed": 3, "dataset": {"name": "synthetic"}, "seeds": [3, 4, 5], "note": "a\nb"}


@dataclass
class _Job:
    seed: int
    data: str
    bundle: Any = None


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The configs built (as their dumped data); a build and a reseed that record what they were given."""
    builds: list[str] = []

    def build_job(cfg: Any, seed: int, where: str, bundle: Any) -> _Job:
        builds.append(cfg)
        return _Job(seed, cfg)

    monkeypatch.setattr(C, "validate_config", lambda data, source: _Cfg(yaml.safe_dump(data, sort_keys=True)))
    monkeypatch.setattr(C, "build_job", lambda cfg, seed, where, bundle: build_job(cfg.text, seed, where, bundle))
    monkeypatch.setattr(C, "reseed", lambda job, seed: _Job(seed, job.data))
    return builds


class _Cfg:
    def __init__(self, text: str) -> None:
        self.text = text
        self.dataset = self

    def model_dump_json(self) -> str:
        return "synthetic"


def _text(**changes: Any) -> str:
    return yaml.safe_dump({**CONFIG, **changes}, sort_keys=False)


@pytest.mark.smoke
def test_the_seeds_of_one_config_are_built_once(built: list[str]) -> None:
    texts = {f"r{s}": _text(seed=s) for s in (3, 4, 5)}
    jobs = C.MlflowJobs(lambda run_id, name: texts[run_id])
    got = [jobs(f"r{s}", s) for s in (3, 4, 5)]
    assert len(built) == 1
    assert [j.seed for j in got] == [3, 4, 5]
    assert len({cast(_Job, j).data for j in got}) == 1
    assert "seed: 3" not in built[0] and "note" in built[0]


@pytest.mark.smoke
def test_a_config_that_differs_beyond_its_seed_is_built_apart(built: list[str]) -> None:
    texts = {"a": _text(seed=3), "b": _text(seed=4, note="other"), "c": _text(seed=5, name="arm2")}
    jobs = C.MlflowJobs(lambda run_id, name: texts[run_id])
    got = [jobs(r, s) for r, s in (("a", 3), ("b", 4), ("c", 5))]
    assert len(built) == 3
    assert len({cast(_Job, j).data for j in got}) == 3


@pytest.mark.smoke
def test_a_seed_line_that_is_not_the_seed_key_is_no_shortcut(built: list[str]) -> None:
    """Texts equal but for a column-0 ``seed:`` line inside a quoted string hold different data: both built."""
    texts = {r: f'name: arm\nnote: "x\nseed: {s}\ny"\nseeds: [3]\n' for r, s in (("a", 3), ("b", 4))}
    assert yaml.safe_load(texts["a"])["note"] != yaml.safe_load(texts["b"])["note"]
    jobs = C.MlflowJobs(lambda run_id, name: texts[run_id])
    jobs("a", 3), jobs("b", 4)
    assert len(built) == 2


@pytest.mark.smoke
def test_the_seed_line_key() -> None:
    rest, at = C._seen_key("a: 1\nseed: 12\nb: 2\n") or ("", -1)
    assert (rest, at) == ("a: 1\nb: 2\n", 5)
    assert C._seen_key("a: 1\nb: 2\n") is None
    assert C._seen_key("seed: 1\nx:\n  seed: 2\nseed: 3\n") is None  # two top-level lines: no shortcut
