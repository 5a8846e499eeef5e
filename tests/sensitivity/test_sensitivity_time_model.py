"""The sweep covers the issue-23 time-model parameters: a step's fixed cost and the collective algorithm.

Fabricated profiles, two ``ar_sgd`` arms of the flip setup (batch 8 and 32 per rank, 512 samples), no training:

* ``step_overhead_ms`` with an ``overhead`` range: the claim's statistic spreads, and its verdict changes, only as
  far as the range lets the fixed cost move (a narrow range keeps every setting FAIL, a wide one does not);
* ``collective_algorithm`` with a choice range ``[auto, hierarchical]``: both choices are visited, the two-level
  all-reduce (less through each NIC) gives the smaller speed-up, and with the claim between the two the verdict
  depends on the choice, which the flip point and the report say in words.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from sensitivity_setups import FLIP_PAPER, SPEED, WORKLOAD, _flip_setup

from distrepro.errors import ConfigError
from distrepro.hardware.profiles import list_profiles, load_profile
from distrepro.report.build import write_report
from distrepro.sensitivity.runner import sensitivity
from distrepro.sensitivity.space import apply_to_profile, profile_variables

OVERHEAD_MS = 50.0


def _gpu(name: str = "gpu", count: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "kind": "gpu", "count": count, "memory_gib": 8,
            "throughput_samples_per_s": {WORKLOAD: SPEED}, "source": "[E] test", **extra}  # fmt: skip


def _profile(name: str, nodes: int, per_node: int, **extra: Any) -> dict[str, Any]:
    return {
        "schema_version": 2,
        "name": name,
        "description": f"{nodes} machines of {per_node} GPUs",
        "nodes": [{"name": f"m{i}", "devices": [_gpu(count=per_node)]} for i in range(nodes)],
        "network": {
            "intra_node": {"latency_us": 0, "bandwidth_gbytes_per_s": 8, "source": "[S] test"},
            "inter_node": {"latency_us": 0, "bandwidth_gbytes_per_s": 1.0, "source": "[S] test"},
        },
        **extra,
    }  # fmt: skip


def _overhead_profile(low: float, high: float) -> dict[str, Any]:
    data = _profile("overhead-sens", 2, 1)
    for node in data["nodes"]:
        node["devices"][0].update(step_overhead_ms={WORKLOAD: OVERHEAD_MS},
                                  ranges={"overhead": {"low": low, "high": high, "reason": "test"}})  # fmt: skip
    return data


def _write(folder: Path, data: dict[str, Any]) -> str:
    path = folder / f"{data['name']}-{id(data)}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def _sweep(path: str, name: str, paper: dict[str, Any] | None = None, samples: int = 24) -> Any:
    info, rs, jobs = _flip_setup(path, paper, profile_name=name, train_size=256)
    result = sensitivity(info, rs, samples=samples, job_for=lambda run_id, seed: jobs[run_id])
    assert result is not None and result.max_validation_error() < 1e-12
    return result


@pytest.mark.smoke
def test_shipped_profiles_offer_both_new_parameters_to_the_sweep() -> None:
    names = set(profile_variables([load_profile("a40-25gbe-16")]))
    assert {"a40-25gbe.overhead", "a40-25gbe.collective_algorithm", "a40-25gbe.speed"} <= names
    for name in list_profiles():  # wherever a fixed step cost is declared, it carries a range
        profile = load_profile(name)
        for node in profile.nodes:
            for group in node.devices:
                assert not group.step_overhead_ms or "overhead" in group.ranges, (name, group.name)


def test_a_declared_step_overhead_without_a_range_is_listed_whatever_its_grade(tmp_path: Path) -> None:
    data = _overhead_profile(0.5, 2.0)
    for node in data["nodes"]:
        node["devices"][0]["source"] = "[M] test"  # measured speeds: the intercept is still an extrapolation
        del node["devices"][0]["ranges"]
    assert load_profile(_write(tmp_path, data)).unranged_estimates() == ["nodes[0].devices[0].overhead"]


def test_an_overhead_range_widened_widens_the_verdicts_range(tmp_path: Path) -> None:
    # speed-up of batch 32 over batch 8 = 32 (T + 8/v + C) / (8 (T + 32/v + C)): it grows with the fixed cost T.
    narrow = _sweep(_write(tmp_path, _overhead_profile(0.9, 1.1)), "overhead-sens")
    wide = _sweep(_write(tmp_path, _overhead_profile(0.1, 10.0)), "overhead-sens")
    assert "gpu.overhead" in narrow.space.names and "gpu.overhead" in wide.space.names
    (n,), (w,) = narrow.claims, wide.claims
    assert n.central.statistic == pytest.approx(w.central.statistic, rel=1e-12)  # same runs, same central values
    n_lo, _, n_hi = n.stat_quantiles()
    w_lo, _, w_hi = w.stat_quantiles()
    assert w_lo < n_lo < n_hi < w_hi
    assert w.tornado[0].span > 5 * n.tornado[0].span and w.tornado[0].high.statistic > w.tornado[0].low.statistic
    assert n.share("PASS") == 0.0 and 0.0 < w.share("PASS") < 1.0  # the verdict now depends on the fixed cost
    (flip,) = w.flips
    assert (flip.variable, flip.below, flip.above) == ("gpu.overhead", "FAIL", "PASS")


def _algorithm_profile(choices: list[str] | None = None) -> dict[str, Any]:
    data = _profile("algo-sens", 2, 2, collective_algorithm="auto")
    data["ranges"] = {"collective_algorithm": {"choices": choices or ["auto", "hierarchical"], "reason": "test"}}
    data["framework"] = {"contention": 0.0, "source": "[E] test"}  # pinned: the algorithm is the only uncertain figure
    return data


def test_the_collective_algorithm_is_a_sweep_axis(tmp_path: Path) -> None:
    path = _write(tmp_path, _algorithm_profile())
    first = _sweep(path, "algo-sens", samples=8)
    assert first.space.names == ["collective_algorithm"]
    var = first.space["collective_algorithm"]
    assert var.choices == ("auto", "hierarchical") and var.describe(var.central) == "auto"
    (claim,) = first.claims
    scan = {var.describe(v): p.statistic for v, p in claim.oat["collective_algorithm"]}
    assert set(scan) == {"auto", "hierarchical"}
    # two nodes of two: the flat ring sends 2(p-1)/p = 1.5 S through each NIC, the two-level one 2(N-1)/N = 1 S, so
    # communication costs less and batch 32's fewer all-reduces save less
    assert scan["hierarchical"] < scan["auto"]
    assert sorted(first.samples_frame()["collective_algorithm"].unique()) == ["auto", "hierarchical"]

    middle = (scan["hierarchical"] + scan["auto"]) / 2  # a claim between the two: the choice decides it
    paper = copy.deepcopy(FLIP_PAPER)
    paper["claims"][0]["claimed"] = middle
    second = _sweep(path, "algo-sens", paper, samples=8)
    (claim,) = second.claims
    assert claim.central.verdict == "PASS" and claim.share("PASS") == pytest.approx(0.5)
    (flip,) = claim.flips
    assert (flip.variable, flip.value, flip.below, flip.above) == ("collective_algorithm", 1.0, "PASS", "FAIL")
    assert claim.decisive() == "collective_algorithm"
    info, rs, _ = _flip_setup(path, paper, profile_name="algo-sens", train_size=256)
    md = write_report(info, rs, tmp_path / "r", root=tmp_path, sensitivity=second).markdown.read_text()
    assert "PASS with collective_algorithm = auto, FAIL with hierarchical" in md
    assert re.search(r"\| collective_algorithm +\| profile +\| auto +\| auto / hierarchical +\| choice +\|", md)


def test_a_choice_picks_the_algorithm_and_nothing_else(tmp_path: Path) -> None:
    profile = load_profile(_write(tmp_path, _algorithm_profile()))
    moved = apply_to_profile(profile, {"collective_algorithm": 1.0})
    assert (profile.collective_algorithm, moved.collective_algorithm) == ("auto", "hierarchical")
    assert moved.ranges == profile.ranges and moved.nodes == profile.nodes
    assert load_profile(_write(tmp_path, moved.to_yaml_dict() | {"name": "algo-sens"})) == moved  # dumps and reloads


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"choices": ["auto", "nvls"]}, "unknown choice(s) ['nvls']"),
        ({"choices": ["ring", "hierarchical"]}, "do not contain the value 'auto'"),
        ({"choices": ["auto", "auto"]}, "choices must be distinct"),
        ({"choices": ["auto", "tree"], "low": 0.5}, "a choice range gives only choices, reason and name"),
        ({"choices": ["auto", "tree"], "reason": ""}, "field 'ranges.collective_algorithm.reason'"),
    ],
)
def test_bad_choice_ranges_name_the_file_and_field(tmp_path: Path, patch: dict[str, Any], message: str) -> None:
    data = _algorithm_profile()
    data["ranges"]["collective_algorithm"].update(patch)
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as err:
        load_profile(path)
    assert str(err.value).startswith(path) and message in str(err.value)


def test_a_profile_ranges_no_other_figure(tmp_path: Path) -> None:
    data = _algorithm_profile()
    data["ranges"]["noise"] = {"choices": ["a", "b"], "reason": "test"}
    with pytest.raises(ConfigError, match="a profile ranges only collective_algorithm"):
        load_profile(_write(tmp_path, data))


def test_a_choice_and_a_figure_make_a_heat_map(tmp_path: Path) -> None:
    data = _algorithm_profile()
    for node in data["nodes"]:
        node["devices"][0].update(step_overhead_ms={WORKLOAD: OVERHEAD_MS},
                                  ranges={"overhead": {"low": 0.5, "high": 2.0, "reason": "test"}})  # fmt: skip
    path = _write(tmp_path, data)
    first = _sweep(path, "algo-sens", samples=8)
    scan = {first.space["collective_algorithm"].describe(v): p.statistic
            for v, p in first.claims[0].oat["collective_algorithm"]}  # fmt: skip
    paper = copy.deepcopy(FLIP_PAPER)
    paper["claims"][0]["claimed"] = (scan["hierarchical"] + scan["auto"]) / 2
    result = _sweep(path, "algo-sens", paper, samples=16)
    (claim,) = result.claims
    assert claim.heat is not None and {claim.heat.x, claim.heat.y} == {"collective_algorithm", "gpu.overhead"}
    choice_axis = claim.heat.xs if claim.heat.x == "collective_algorithm" else claim.heat.ys
    assert choice_axis == [0.0, 1.0]  # each choice once, not nine points between them
    info, rs, _ = _flip_setup(path, paper, profile_name="algo-sens", train_size=256)
    out = tmp_path / "heat"
    md = write_report(info, rs, out, root=tmp_path, sensitivity=result).markdown.read_text()
    assert (out / "figures" / "sensitivity_heatmap.png").stat().st_size > 5000 and "sensitivity_heatmap.png" in md
    assert (out / "figures" / "sensitivity_tornado.png").stat().st_size > 5000
