"""What a trained cell leaves in its run besides its metric history: summary metrics, the evaluation and timeline
tables, and whether it diverged (:mod:`distrepro.orchestration.divergence`). Every executor's worker writes the same
through :func:`distrepro.orchestration.campaign.train_cell`."""

from __future__ import annotations

import io

import pandas as pd

from distrepro import metrics as M
from distrepro.job.observer import eval_metrics
from distrepro.job.resolve import Job
from distrepro.job.results import RunResult


def summary_metrics(job: Job, result: RunResult) -> dict[str, float]:
    final = result.final
    out = {M.final(k): v for k, v in final.metrics.items()}
    for r in range(job.world_size):  # the profile's speed for the charged workload: ideal bounds need it
        out[M.worker(r, M.DECLARED_SPEED)] = job.compute.declared_samples_per_s(r)
    out.update(
        {
            M.FINAL_EMULATED_S: final.emulated_s,
            M.FINAL_WALL_S: result.wall_s,
            M.FINAL_SAMPLES: float(final.samples),
            M.FINAL_EPOCHS: final.epoch,
            M.FINAL_STEPS: float(final.step),
            M.FINAL_USEFUL_FLOPS: final.samples * job.compute.flops_per_sample / final.emulated_s
            if final.emulated_s > 0
            else float("nan"),
        }
    )
    clock = sum(w.clock_s for w in final.workers)
    if clock > 0:  # the share of all workers' time spent waiting (A²CiD²'s "reduces idle time")
        out[M.FINAL_IDLE_FRACTION] = sum(w.idle_s for w in final.workers) / clock
    if job.config.target is not None:
        out[M.TARGET_REACHED] = 1.0 if result.time_to_target_s is not None else 0.0
        if result.time_to_target_s is not None:
            out[M.TIME_TO_TARGET_S] = result.time_to_target_s
            out[M.STEP_TO_TARGET] = float(result.step_to_target or 0)
    return out


def evals_table(result: RunResult) -> pd.DataFrame:
    rows = [{"step": r.step, "final": r.final, **eval_metrics(r)} for r in result.evals]
    return pd.DataFrame(rows)


def timeline_table(result: RunResult) -> pd.DataFrame:
    return pd.DataFrame([vars(s) for s in result.timeline], columns=["rank", "kind", "start_s", "end_s", "step"])


def csv_text(df: pd.DataFrame) -> str:
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    return buf.getvalue()
