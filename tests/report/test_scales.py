"""One report per paper across scales (distrepro.report.scales): which run stands for an (arm, seed), and every
scale's verdicts kept when another scale or a subset of arms runs into the same store."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from tiny_paper import PAPER, paper_root  # noqa: F401  (the fixture)

from distrepro.report.build import build_report
from distrepro.report.figures.arms import speedup_figure
from distrepro.report.figures.palette import arm_style
from distrepro.report.scales import latest_runs
from distrepro.reproduction.reproduce import reproduce

ACCURACY_CLAIM = """\
  - id: as-accurate
    kind: relative_improvement
    arm: local
    baseline: sync
    metric: final/val_accuracy
    direction: max
    form: ratio
    claimed: 1.0
    accept: {statistic: median, rel_tolerance: 0.9}
    source: {kind: text, quote: "as accurate as synchronous training"}
    evidence: derived
"""


def _runs(rows: list[tuple[str, str, int, str, int]]) -> pd.DataFrame:
    """(run id, config digest, seed, status, start minute) → a runs table as load_runs makes it."""
    return pd.DataFrame(
        {
            "run_id": [r[0] for r in rows],
            "tags.distrepro.config_sha256": [r[1] for r in rows],
            "seed": [r[2] for r in rows],
            "status": [r[3] for r in rows],
            "start_time": [pd.Timestamp("2026-01-01", tz="UTC") + pd.Timedelta(minutes=r[4]) for r in rows],
            "method": "m",
            "profile": "p",
            "profile_variant": "",
            "scale": "proxy",
        }
    )


def test_each_arm_config_and_seed_keeps_its_newest_finished_run() -> None:
    runs = _runs(
        [
            ("old", "a", 0, "FINISHED", 0),
            ("new", "a", 0, "FINISHED", 5),
            ("failed-later", "a", 1, "FINISHED", 1),
            ("failed", "a", 1, "FAILED", 9),  # a failure never hides a finished run
            ("other-arm", "b", 0, "FINISHED", 2),
            ("only-failed", "b", 1, "FAILED", 3),  # kept: the seed has nothing better
        ]
    )
    assert sorted(latest_runs(runs)["run_id"]) == ["failed-later", "new", "only-failed", "other-arm"]


def test_the_speedup_figure_takes_duplicated_seeds() -> None:
    runs = _runs([("b0", "b", 0, "FINISHED", 0), ("b0again", "b", 0, "FINISHED", 9), ("f0", "f", 0, "FINISHED", 1)])
    runs["final/emulated_s"] = [10.0, 8.0, 4.0]
    labels = {"b0": "base", "b0again": "base", "f0": "fast"}
    style = arm_style(["base", "fast"], {"base": "p", "fast": "p"})
    fig = speedup_figure(runs, labels, style, "base", {})
    assert fig is not None  # the newest base run (8 s) over 4 s: a bar at 2x, no ambiguous-truth-value crash
    (bars,) = [ax for ax in fig.axes if ax.patches]
    assert sorted(round(p.get_width(), 6) for p in bars.patches) == [1.0, 2.0]


@pytest.mark.slow
def test_other_scales_and_subset_runs_add_to_the_report(paper_root: Path, mlflow_uri: str) -> None:  # noqa: F811
    folder = paper_root / "methods" / "tiny"
    (folder / "paper.yaml").write_text(PAPER + ACCURACY_CLAIM)
    mid = (folder / "tiny.yaml").read_text().replace("steps: 4", "steps: 6")
    (folder / "tiny.mid.yaml").write_text(mid)
    quiet = {"show_progress": False, "root": paper_root}
    reproduce("tinypaper", **quiet)
    reproduce("tinypaper", scale="mid", **quiet)
    subset = reproduce("tinypaper", arms=["sync"], seeds=(0,), **quiet)  # seed 0 of sync now has two proxy runs
    rows = {v.claim_id: v for v in subset.report.verdicts}
    assert rows["fewer-bytes"].verdict == "PASS", rows["fewer-bytes"].reason  # not "arm missing"
    assert "other scales" in rows["as-accurate"].reason  # judged at proxy and at mid, both named
    data = json.loads(Path("reports/tinypaper/claims_verdict.json").read_text())
    assert set(data["by_scale"]) == {"proxy", "mid"}
    assert (
        data["by_scale"]["mid"]["all"]["PASS"]
        + data["by_scale"]["mid"]["all"]["FAIL"]
        + data["by_scale"]["mid"]["all"]["INCONCLUSIVE"]
        == 1
    )  # only the accuracy claim moves to mid
    text = Path("reports/tinypaper/report.md").read_text()
    assert "### Verdicts by scale" in text
    index = Path("reports/index.md").read_text()
    assert "mid:" in index and "proxy:" in index
    again = build_report("tinypaper", show_progress=False, root=paper_root)  # `distrepro report` on the same store
    assert [v.verdict for v in again.verdicts] == [v.verdict for v in subset.report.verdicts]


def test_a_subset_rerun_keeps_the_other_arms_verdicts(paper_root: Path, mlflow_uri: str) -> None:  # noqa: F811
    quiet = {"show_progress": False, "root": paper_root}
    reproduce("tinypaper", report=False, **quiet)
    subset = reproduce("tinypaper", arms=["sync"], seeds=(0,), **quiet)  # `local` not trained, seed 0 of sync twice
    (verdict,) = subset.report.verdicts
    assert verdict.verdict == "PASS", verdict.reason  # read from the earlier session's runs, not "arm missing"
    runs = pd.read_csv("reports/tinypaper/runs.csv")
    assert len(runs) == 4 and runs.groupby(["campaign", "seed"]).size().max() == 1  # one run per (arm, seed)


def test_an_undecided_claim_shows_the_scale_inside_its_regime() -> None:
    """Decent-DP's T2-accum: outside the regime at proxy (7 refreshes), straddling its margin at mid (10 seeds):
    the mid verdict is the one that says what would decide it; a decided verdict wins over both."""
    from distrepro.claims.verdict_record import Verdict
    from distrepro.report.scales import deciding_verdict

    outside = Verdict("c", "difference", "INCONCLUSIVE", "outside the paper's regime", out_of_regime=True)
    straddles = Verdict("c", "difference", "INCONCLUSIVE", "the CI straddles the margin", n_seeds=10)
    missing = Verdict("c", "difference", "INCONCLUSIVE", "arm missing")
    failed = Verdict("c", "difference", "FAIL", "below the margin", n_seeds=5)
    assert deciding_verdict([("proxy", outside), ("mid", straddles)], "proxy") == ("mid", straddles)
    assert deciding_verdict([("proxy", outside), ("paper", missing)], "proxy") == ("proxy", outside)
    assert deciding_verdict([("proxy", straddles), ("mid", failed)], "proxy") == ("mid", failed)


def test_the_deciding_scale_does_not_depend_on_the_order_the_scales_were_judged_in() -> None:
    """The report judges the scales largest first: undecided at both mid and proxy, both inside the regime, the row
    shows mid's verdict whichever order they come in (it once showed proxy's when mid came first); decided at both,
    the larger scale's."""
    from distrepro.claims.verdict_record import Verdict
    from distrepro.report.scales import deciding_verdict

    mid = Verdict("c", "ordering", "INCONCLUSIVE", "the CI straddles the margin", n_seeds=5)
    proxy = Verdict("c", "ordering", "INCONCLUSIVE", "the CI straddles the margin", n_seeds=5)
    for judged in ([("mid", mid), ("proxy", proxy)], [("proxy", proxy), ("mid", mid)]):
        assert deciding_verdict(judged, "mid")[0] == "mid"
        assert deciding_verdict(judged, "proxy")[0] == "mid"
    passed = Verdict("c", "ordering", "PASS", "above the margin", n_seeds=5)
    failed = Verdict("c", "ordering", "FAIL", "below the margin", n_seeds=10)
    for judged in ([("mid", failed), ("proxy", passed)], [("proxy", passed), ("mid", failed)]):
        assert deciding_verdict(judged, "proxy") == ("mid", failed)
    missing = Verdict("c", "ordering", "INCONCLUSIVE", "arm missing")
    assert deciding_verdict([("paper", missing), ("proxy", missing)], "proxy")[0] == "proxy"
    assert deciding_verdict([("proxy", missing), ("paper", missing)], "gpu")[0] == "paper"
