"""The columns a verdict reads (distrepro.sensitivity.columns): judging on them gives the whole table's verdicts."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from distrepro.claims.schema import validate_paper
from distrepro.claims.verdicts import evaluate_claim
from distrepro.sensitivity.columns import judged_table

PAPER: dict[str, Any] = {
    "kind": "reproduction",
    "citation": {"id": "cols", "title": "Columns"},
    "setup": {"profile": "hetero-2fast-2slow", "baseline": "equal", "min_seeds": 3},
    "claims": [
        {
            "id": "C1", "kind": "relative_improvement", "arm": "adaptive", "metric": "final/emulated_s",
            "direction": "min", "claimed": [0.2, 0.5], "accept": {"abs_tolerance": 0.01}, "source": {"kind": "text"},
            "evidence": "verbatim",
        },
        {
            "id": "C2", "kind": "final_metric", "arm": "adaptive", "metric": "val_accuracy", "direction": "max",
            "claimed": 0.8, "accept": {"abs_tolerance": 0.05}, "source": {"kind": "table"}, "evidence": "verbatim",
            "regime": [
                {
                    "id": "rounds", "what": "enough rounds", "metric": "method/rounds", "arm": "adaptive",
                    "at_least": 3, "source": "s",
                },
            ],
        },
        {
            "id": "C3", "kind": "ordering", "arms": ["adaptive", "equal"], "metric": "final/emulated_s",
            "direction": "min", "source": {"kind": "text"}, "evidence": "reconstructed",
        },
    ],
}  # fmt: skip


def _runs() -> pd.DataFrame:
    rows = []
    for arm, total, acc in (("equal", 12.0, 0.80), ("adaptive", 8.0, 0.81)):
        for seed in range(3):
            row: dict[str, Any] = {
                "run_id": f"{arm}-{seed}", "parent_run_id": f"c-{arm}", "method": arm, "profile": "hetero-2fast-2slow",
                "seed": seed, "status": "FINISHED", "scale": "proxy", "campaign": f"c-{arm}",
                "start_time": pd.Timestamp("2026-01-01", tz="UTC") + pd.Timedelta(minutes=seed),
                "final/emulated_s": total + 0.1 * seed, "final/val_accuracy": acc + 0.01 * seed,
                "method/rounds": 2.0 + seed, "tags.git.commit": "abc", "engine": "inprocess",
            }  # fmt: skip
            for r in range(8):  # what a real table is wide with: per-worker series, allocations, other methods' params
                row[f"worker/{r}/compute_s"] = total / (r + 1)
                row[f"alloc/{r}/share"] = 1 / 8
                row[f"params.method_params.other_{r}"] = str(r)
                row[f"tags.note_{r}"] = "x"
            rows.append(row)
    return pd.DataFrame(rows)


@pytest.mark.smoke
def test_judging_on_the_judged_columns_gives_the_whole_tables_verdicts() -> None:
    spec = validate_paper(PAPER)
    runs = _runs()
    table = judged_table(spec, runs)
    assert len(table.columns) < len(runs.columns) - 30  # the per-worker, alloc, tag and foreign param columns go
    assert not any(c.startswith(("worker/", "alloc/", "tags.")) for c in table.columns)
    assert {"final/emulated_s", "final/val_accuracy", "method/rounds", "run_id", "seed"} <= set(table.columns)
    whole = [evaluate_claim(c, spec, runs) for c in spec.claims]
    assert [v.verdict for v in whole] != ["INCONCLUSIVE"] * 3  # something was decided on the whole table
    assert any(v.out_of_regime for v in whole)  # C2's regime read method/rounds (2, 3, 4 < 3 on a seed)
    assert [repr(v) for v in (evaluate_claim(c, spec, table) for c in spec.claims)] == [repr(v) for v in whole]


@pytest.mark.smoke
def test_a_table_of_only_judged_columns_is_returned_as_it_is() -> None:
    spec = validate_paper(PAPER)
    table = judged_table(spec, _runs())
    assert judged_table(spec, table) is table
