"""``distrepro reproduce``: every arm of a paper runs as its own campaign, then the report is built."""

from __future__ import annotations

from pathlib import Path

import mlflow
import pytest
from tiny_paper import PAPER

from distrepro.cli import main
from distrepro.errors import ConfigError
from distrepro.reproduction.reproduce import reproduce

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.smoke
def test_reproduce_runs_each_arm_and_judges_the_claim(paper_root: Path, mlflow_uri: str, monkeypatch) -> None:
    import distrepro.reproduction.reporting as reporting

    real, shown = reporting.build_report, []  # --no-progress reaches the report's sensitivity sweep too
    monkeypatch.setattr(reporting, "build_report", lambda *a, **kw: shown.append(kw["show_progress"]) or real(*a, **kw))
    result = reproduce("tinypaper", show_progress=False, root=paper_root)
    assert shown == [False]
    assert set(result.campaigns) == {"sync", "local"}
    assert all(len(c.cells) == 2 for c in result.campaigns.values())
    runs = mlflow.search_runs(experiment_names=["distrepro/tinypaper"])
    children = runs[runs["tags.mlflow.parentRunId"].notna()]
    assert sorted(children["tags.distrepro.campaign"].unique()) == ["local", "sync"]
    assert set(children["params.method_params.period"].dropna()) == {"2"}
    (verdict,) = result.report.verdicts
    assert verdict.claim_id == "fewer-bytes"
    assert verdict.verdict == "PASS", (verdict.statistic, verdict.reason)  # half the all-reduces
    assert Path(result.report.html).is_file()


def test_reproduce_errors_name_the_paper_file(paper_root: Path, mlflow_uri: str, capsys) -> None:
    with pytest.raises(ConfigError, match=r"setup\.arms"):
        reproduce("tinypaper", arms=["nope"], root=paper_root)
    with pytest.raises(ConfigError, match=r"tiny\.paper\.yaml"):
        reproduce("tinypaper", scale="paper", root=paper_root)
    assert main(["reproduce", "nosuchpaper"]) == 2
    assert "nosuchpaper" in capsys.readouterr().err


def test_optional_arms_run_only_when_asked(paper_root: Path, mlflow_uri: str) -> None:
    result = reproduce("tinypaper", seeds=(0,), with_arms=["rare"], report=False, show_progress=False, root=paper_root)
    assert set(result.campaigns) == {"sync", "local", "rare"}
    runs = mlflow.search_runs(experiment_names=["distrepro/tinypaper"])
    assert set(runs["params.method_params.period"].dropna()) == {"2", "4"}
    only = reproduce("tinypaper", seeds=(0,), arms=["rare"], report=False, show_progress=False, root=paper_root)
    assert set(only.campaigns) == {"rare"}


def test_a_claim_on_an_optional_arm_is_refused(tmp_path: Path) -> None:
    from distrepro.claims.schema import load_paper_file

    path = tmp_path / "paper.yaml"
    path.write_text(PAPER.replace("    arm: local\n", "    arm: rare\n"))
    with pytest.raises(ConfigError, match=r"claims\[0\]\.arm.*optional"):
        load_paper_file(path)
    path.write_text(PAPER)  # the same arm, carrying no claim, is fine
    assert load_paper_file(path).setup.arms["rare"].optional


PRODUCTS = """\
from pathlib import Path

from distrepro import api


def build(ctx: api.ReportContext) -> list[Path]:
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    path = ctx.out_dir / "grid.csv"
    path.write_text(f"scale\\n{ctx.scale}\\n")
    return [path]
"""


PLAIN_METHOD = """\
from distrepro import api


class Method(api.Method[api.MethodParams]):
    synchronous = True

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        raise AssertionError("no arm runs this method")
"""


def test_a_method_folders_products_are_built_with_the_report_only(
    paper_root: Path, mlflow_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = paper_root / "methods" / "tiny"
    (folder / "method.py").unlink()  # the symlinked local_sgd names itself local_sgd: not loadable as 'tiny'
    (folder / "method.py").write_text(PLAIN_METHOD)
    (folder / "products.py").write_text(PRODUCTS)
    grid = Path("reports/tinypaper/grid.csv")
    # train only: Decent-DP's grid (minutes of simulation) was built even so
    assert main(["reproduce", "tinypaper", "--seeds", "0", "--arms", "sync", "--no-report", "--no-progress"]) == 0
    assert not grid.exists() and "report:" not in capsys.readouterr().out
    reproduce("tinypaper", seeds=(0,), arms=["sync"], show_progress=False, root=paper_root)
    assert grid.read_text().splitlines() == ["scale", "proxy"]


def test_the_no_report_help_says_products_are_skipped(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--no-report train only: no report and no report products" in help_text


def test_a_device_is_checked_before_the_reproduction_only_where_its_cells_train() -> None:
    """``device: cuda`` on a host without CUDA is refused before the umbrella run opens when the cells train here;
    a remote executor's workers check their own device (a SLURM login node has no GPU, its nodes do)."""
    from distrepro.orchestration.executors.selection import ExecutorSpec
    from distrepro.reproduction.training import trains_here as _trains_here

    assert _trains_here(None) and _trains_here(ExecutorSpec()) and _trains_here(ExecutorSpec(kind="ray"))
    assert _trains_here(ExecutorSpec(kind="slurm", slurm_cluster="local"))
    assert not _trains_here(ExecutorSpec(kind="ray", ray_address="head:6379"))
    assert not _trains_here(ExecutorSpec(kind="slurm"))


def test_system_metrics_reach_every_arms_cells_on_an_executor(
    paper_root: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``reproduce --system-metrics`` on an executor (``--jobs N``, Ray, SLURM): every arm's cells carry the flag
    to the worker that trains them (it used to reach only the ``--jobs 1`` path)."""
    from typing import Any

    from distrepro.orchestration.executors.local_pool import LocalExecutor
    from distrepro.tracking import runlog

    seen: list[tuple[str, bool]] = []

    class Recording(LocalExecutor):  # jobs=1: run_cell_task in this process, as a Ray task or SLURM job runs it
        def run(self, tasks: Any, events: Any) -> Any:
            seen.extend((t.key, t.system_metrics) for t in tasks)
            return super().run(tasks, events)

    monkeypatch.setattr(runlog, "start_system_metrics", lambda run_id, options: None)  # no sampler thread needed
    result = reproduce(
        "tinypaper", seeds=(0,), report=False, show_progress=False, root=paper_root, system_metrics=True,
        executor=Recording(jobs=1, threads=1),
    )  # fmt: skip
    assert len(seen) == len(result.campaigns) >= 2 and all(flag for _, flag in seen), seen


def test_arms_trained_here_say_the_cell_count_arm_and_eta(paper_root: Path, mlflow_uri: str, capsys) -> None:
    reproduce("tinypaper", seeds=(0,), report=False, show_progress=False, root=paper_root)
    err = capsys.readouterr().err
    warned = err.index("warning: 1 seed cannot decide claim fewer-bytes (it needs 2: register 2 fresh seeds first")
    assert warned < err.index("[arm 1/2 sync]")  # said before any training
    assert "[arm 1/2 sync] cells 1–1 of 2 · 0:00:0" in err and "ETA – (after the first arm)" in err
    second = next(line for line in err.splitlines() if line.startswith("[arm 2/2 local]"))
    assert "cells 2–2 of 2" in second and "ETA 0:" in second  # from the first arm's wall time
    assert "[sync (ar_sgd) · hetero-2fast-2slow · seed 0]" in err  # the arm's name, not only its method
    steps = [line for line in err.splitlines() if "] step " in line]
    assert steps and all(line.endswith("(final)") for line in steps)  # per-step lines only with --verbose


def test_a_registered_scale_reproduces_on_its_confirmatory_seeds(paper_root: Path, mlflow_uri: str, capsys) -> None:
    """Without ``--seeds`` a scale with a pre-registration record runs the record's seeds (the registered test, the
    runs RESULTS.md reads), not the configs' exploratory 0, 1; ``--seeds`` still chooses others."""
    from distrepro.claims.preregistration import preregister

    preregister("tinypaper", "proxy", [100, 101], root=paper_root)
    capsys.readouterr()
    result = reproduce("tinypaper", arms=["sync"], report=False, show_progress=False, root=paper_root)
    assert sorted(c.seed for c in result.campaigns["sync"].cells) == [100, 101]
    assert "seeds 100-101: the confirmatory seeds pre-registered in tiny/preregistration/proxy.yaml" in (
        capsys.readouterr().err
    )
    chosen = reproduce("tinypaper", seeds=(0,), arms=["sync"], report=False, show_progress=False, root=paper_root)
    assert [c.seed for c in chosen.campaigns["sync"].cells] == [0]
    err = capsys.readouterr().err
    assert "the confirmatory seeds pre-registered" not in err
    # the one seed cannot decide the 2-seed claim: the warning points at the registered session that can
    assert "(it needs 2: `distrepro reproduce tinypaper` runs the 2 seeds pre-registered for it)" in err


def test_loading_the_arms_is_named_while_it_lasts(
    paper_root: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake slow preparation (the arms' configs, the store, the estimate): the heartbeat names it."""
    from slow_step import Stopped, alive_lines, captured_stderr, slow_step

    import distrepro.reproduction.reproduce as reproduce_module

    out = captured_stderr(monkeypatch)
    said = "reproduce tinypaper: loading the arms' configs, checking the store, estimating the time, opening "
    monkeypatch.setattr(reproduce_module, "_load_arms", slow_step(out, said))
    with pytest.raises(Stopped, match="seen"):
        reproduce("tinypaper", root=paper_root)
    assert alive_lines(out) and all(said in line for line in alive_lines(out))
