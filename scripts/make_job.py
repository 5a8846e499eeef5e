"""Write the job JSON that ``python -m distrepro.engine.multiprocess.worker --job JOB --out OUT`` reads.

``distrepro run`` with ``engine: dist`` writes this file itself (``DistEngine.run_cell``) and starts
the ranks on this machine. To start the ranks yourself (torchrun on several nodes, SLURM), write
the file with this script, copy it (or put it on a shared filesystem) where every node can read
it, and start every node's ranks with the same command (``docs/multinode.md``)::

    python scripts/make_job.py configs/quickstart.yaml --set engine=dist -o job.json
    torchrun --standalone --nproc-per-node=4 -m distrepro.engine.multiprocess.worker --job job.json --out OUT

The file holds the validated config (every field resolved, overrides applied), the seed, and
optionally the MLflow run that rank 0 logs to:

* without ``--mlflow``: nothing is logged; rank 0 writes ``OUT/result.pkl`` (a
  :class:`distrepro.job.results.RunResult`), every rank writes ``OUT/rank<r>.status.json``;
* with ``checkpoint.every_steps`` set, every rank writes checkpoints below
  ``checkpoint.dir/<run id>`` (``job-<name of the job file>`` without ``--mlflow``), which must be
  on a filesystem all nodes share; ``--resume-from checkpoint.dir/<run>/step…`` continues from one;
* with ``--mlflow``: an MLflow run is created now (experiment ``distrepro/<paper>``, the same
  params and tags as ``distrepro run`` gives a cell) and left RUNNING; rank 0 logs metrics and
  throttle tags to it while training. Afterwards ``make_job.py --finish OUT --job job.json`` logs
  the summary metrics and the evaluation/timeline tables from ``OUT/result.pkl`` and marks the
  run FINISHED (FAILED when there is no result). The tracking URI must be reachable from the
  node that runs rank 0 (an ``http://`` MLflow server, or sqlite on a filesystem that node sees).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def job_spec(config: Path, overrides: list[str], seed: int | None) -> tuple[dict[str, Any], Any]:
    """The job dict (as ``DistEngine.run_cell`` writes it, without a run) and the built job."""
    from distrepro.config.run_config import load_config
    from distrepro.job.resolve import build_job

    cfg = load_config(config, overrides)
    if seed is None:
        seed = cfg.seeds[0]
    elif seed not in cfg.seeds:
        cfg = cfg.model_copy(update={"seeds": [seed]})
    job = build_job(cfg, seed, config)  # validates everything (method, profile, dataset, ...) now
    spec = {
        "config": cfg.model_dump(mode="json"),
        "seed": seed,
        "source": str(config),
        "run_id": None,
        "tracking_uri": None,
        "checkpoint_dir": None,
        "resume_from": None,
    }
    return spec, job


def checkpoint_dir(job: Any, run_id: str | None, output: Path) -> str | None:
    """``checkpoint.dir/<run id>`` as ``distrepro run`` uses (``job-<file stem>`` without a run), or None."""
    ckpt = job.config.checkpoint
    if not ckpt.every_steps:
        return None
    return str((ckpt.dir / (run_id or f"job-{output.stem}")).resolve())


def create_run(spec: dict[str, Any], job: Any, tracking_uri: str | None) -> tuple[str, str]:
    """An MLflow run for the job, tagged and parametrised like a ``distrepro run`` cell; left RUNNING."""
    from distrepro.orchestration.campaign import run_tags
    from distrepro.tracking.campaign_run import provenance_tags
    from distrepro.tracking.mlflow_client import (
        default_artifact_location,
        ensure_experiment,
        experiment_name,
        make_client,
        resolve_tracking_uri,
    )
    from distrepro.tracking.runlog import RunLogger, flatten_params

    uri = tracking_uri or resolve_tracking_uri()
    client = make_client(uri)
    cfg = job.config
    experiment = experiment_name(cfg.paper)
    exp_id = ensure_experiment(client, experiment, default_artifact_location(uri, experiment))
    run = client.create_run(exp_id, run_name=f"{cfg.method}-{job.profile.name}-s{job.seed}")
    logger = RunLogger(client, run.info.run_id)
    logger.set_tags({**provenance_tags(REPO), **run_tags(job, "dist"), "distrepro.launch": "make_job.py"})
    logger.log_params(
        flatten_params(
            {
                **spec["config"],
                "seed": job.seed,
                "method_params": job.params.model_dump(mode="json"),
                "batch_sizes": list(job.batch_sizes),
            }
        )
    )
    logger.flush()
    return run.info.run_id, uri


def finish(out: Path, job_file: Path) -> int:
    """Log the result rank 0 left in ``out`` to the job's MLflow run and close the run."""
    from distrepro.config.run_config import validate_config
    from distrepro.job.resolve import build_job
    from distrepro.orchestration.campaign import evals_table, summary_metrics, timeline_table
    from distrepro.tracking.mlflow_client import make_client
    from distrepro.tracking.runlog import RunLogger

    spec = json.loads(job_file.read_text())
    if not spec.get("run_id"):
        print("make_job.py: this job has no MLflow run (it was written without --mlflow)", file=sys.stderr)
        return 2
    logger = RunLogger(make_client(spec["tracking_uri"]), spec["run_id"])
    result_file = out / "result.pkl"
    if not result_file.is_file():
        statuses = sorted(out.glob("rank*.status.json"))
        errors = [json.loads(p.read_text()) for p in statuses]
        errors = [s for s in errors if s.get("status") == "error"]
        if errors:
            logger.set_tags({"distrepro.error": f"rank {errors[0]['rank']}: {errors[0]['error']}"[:5000]})
        logger.finish("FAILED")
        print(f"make_job.py: no result in {out}; run {spec['run_id']} marked FAILED", file=sys.stderr)
        return 1
    result = pickle.loads(result_file.read_bytes())
    job = build_job(validate_config(spec["config"], spec.get("source")), int(spec["seed"]), spec.get("source"))
    logger.log_summary(summary_metrics(job, result))
    logger.log_text(evals_table(result).to_csv(index=False), "evals.csv")
    logger.log_text(timeline_table(result).to_csv(index=False), "timeline.csv")
    logger.finish("FINISHED")
    print(f"run {spec['run_id']} FINISHED: final {result.final.metrics}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", type=Path, help="run config (YAML)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config field, as for 'distrepro run' (repeatable)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=None, help="the seed to run (default: the config's first seed)")
    ap.add_argument("-o", "--output", type=Path, default=Path("job.json"), help="job file to write (job.json)")
    ap.add_argument("--mlflow", action="store_true", help="create the MLflow run that rank 0 logs to")
    ap.add_argument("--tracking-uri", default=None, help="MLflow URI (default $MLFLOW_TRACKING_URI or ./mlflow.db)")
    ap.add_argument(
        "--resume-from",
        type=Path,
        default=None,
        help="a complete checkpoint folder (checkpoint.dir/<run>/step…) to continue",
    )
    ap.add_argument("--finish", type=Path, metavar="OUT", help="log OUT/result.pkl to the job's run and close it")
    ap.add_argument("--job", type=Path, default=Path("job.json"), help="job file, with --finish (job.json)")
    args = ap.parse_args(argv)

    from distrepro.errors import DistreproError

    try:
        if args.finish is not None:
            return finish(args.finish, args.job)
        if args.config is None:
            ap.error("a config is required (or --finish OUT)")
        spec, job = job_spec(args.config, args.overrides, args.seed)
        if args.mlflow:
            spec["run_id"], spec["tracking_uri"] = create_run(spec, job, args.tracking_uri)
        spec["checkpoint_dir"] = checkpoint_dir(job, spec["run_id"], args.output)
        if args.resume_from is not None:
            from distrepro.engine.checkpoint import MARKER

            if not (args.resume_from / MARKER).is_file():
                print(
                    f"make_job.py: {args.resume_from} is not a complete checkpoint (no COMPLETE marker)",
                    file=sys.stderr,
                )
                return 2
            spec["resume_from"] = str(args.resume_from.resolve())
        args.output.write_text(json.dumps(spec, indent=1))
    except DistreproError as exc:
        print(f"make_job.py: {exc}", file=sys.stderr)
        return 2
    print(
        f"wrote {args.output}: {job.config.method} on {job.profile.name} ({job.world_size} ranks), seed {job.seed}"
        + (f", MLflow run {spec['run_id']}" if spec["run_id"] else "")
    )
    print(f"start {job.world_size} ranks in total, e.g. on one machine:")
    print(
        f"  torchrun --standalone --nproc-per-node={job.world_size} -m distrepro.engine.multiprocess.worker "
        f"--job {args.output} --out OUT"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
