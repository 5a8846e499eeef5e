"""``--executor slurm``: each cell a SLURM job (or a task of one job array), through submitit.

submitit pickles :func:`~distrepro.orchestration.executors.cell_task.run_cell_task_shipped` (the cell,
whose outcome comes back without the trained models: the runs hold them) and its
:class:`~distrepro.orchestration.executors.cell_task.CellTask`, writes an sbatch script that runs it with
``srun`` on one task, and reads the outcome back from the job's folder; so the nodes need the same
installation of distrepro (and the same plugin roots) as the submitting machine, and ``slurm.folder`` on a
filesystem they share. Resources come from the config's ``slurm:`` block
(:class:`~distrepro.config.slurm_block.SlurmBlock`) and the ``--slurm-*`` flags: partition, time, GPUs,
CPUs (default: the cores the cell occupies).

A dist-engine cell (several ranks) is one task too: the job script exports ``DISTREPRO_TORCHRUN``, the
``torchrun --standalone`` line for the profile's world size, and the engine starts the ranks with it
inside the job's allocation (one node).

``cluster="local"`` (``--slurm-cluster local``) runs the same submission, parameters and setup lines as
processes on this machine (submitit's local executor): what the tests use, and a way to try a SLURM
campaign before queueing it. Ctrl-C cancels every job (``scancel``; SIGINT for local jobs, which marks
the run KILLED).
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import Any

from distrepro.config.slurm_block import SlurmBlock
from distrepro.errors import DistreproError
from distrepro.orchestration.executors.cell_task import CellOutcome, CellTask, failed, run_cell_task_shipped
from distrepro.orchestration.executors.interface import Events

POLL_S = 2.0


def torchrun_line(world_size: int, python: str | None = None) -> str:
    """The launcher of a dist-engine cell's ranks inside its job: one node, ``world_size`` ranks."""
    py = python or shlex.quote(sys.executable)
    return f"{py} -m torch.distributed.run --standalone --nnodes=1 --nproc-per-node={world_size}"


def job_parameters(block: SlurmBlock, task: CellTask) -> dict[str, Any]:
    """submitit ``AutoExecutor`` parameters of ``task``'s job: generic ones, and ``slurm_``-prefixed ones
    that only the SLURM executor reads (the local one ignores them, but for ``local_setup``)."""
    setup = list(block.setup)
    if task.engine == "dist":
        setup.append(f"export DISTREPRO_TORCHRUN={shlex.quote(torchrun_line(task.world_size))}")
    additional = {k: v for k, v in {"account": block.account, "qos": block.qos}.items() if v}
    if block.constraint:
        additional["constraint"] = block.constraint
    additional.update(block.extra)
    params: dict[str, Any] = {
        "name": f"distrepro-{task.key}".replace("/", "-"),
        "timeout_min": block.time_min,
        "nodes": 1,
        "tasks_per_node": 1,
        "cpus_per_task": block.cpus_per_task or task.cpus,
        "slurm_setup": setup,
        "slurm_array_parallelism": block.array_parallelism,
        "local_setup": setup,
    }
    if block.gpus_per_node:
        params["gpus_per_node"] = block.gpus_per_node
    if block.mem_gb:
        params["mem_gb"] = block.mem_gb
    if block.partition:
        params["slurm_partition"] = block.partition
    if additional:
        params["slurm_additional_parameters"] = additional
    return params


def sbatch_script(block: SlurmBlock, task: CellTask, folder: str | Path | None = None) -> str:
    """The sbatch script submitit writes for ``task``'s job on a SLURM cluster.

    Built with submitit's own parameter mapping and script writer, so it can be checked (and shown) on a
    machine without SLURM, where submitit's SLURM executor refuses to start.
    """
    from submitit.slurm.slurm import SlurmExecutor, _convert_mem, _make_sbatch_string

    params = job_parameters(block, task)
    generic: dict[str, str] = {str(k): str(v) for k, v in (SlurmExecutor._equivalence_dict() or {}).items()}
    native: dict[str, Any] = {}
    for key, value in params.items():
        if key.startswith("slurm_"):
            native[key[len("slurm_") :]] = value
        elif key in generic:
            native[generic[key]] = value
    if "mem" in native:
        native["mem"] = _convert_mem(native["mem"])
    where = Path(folder or block.folder).resolve() / "%j"
    command = " ".join([shlex.quote(sys.executable), "-u -m submitit.core._submit", shlex.quote(str(where))])
    return str(_make_sbatch_string(command=command, folder=where, **native))


class SlurmExecutor:
    name = "slurm"

    def __init__(self, block: SlurmBlock, cluster: str | None = None, blocks: dict[str, SlurmBlock] | None = None):
        """``block``: the resources of every cell, unless ``blocks`` (cell key → block, from each arm's
        config) says otherwise; ``cluster``: ``None`` (SLURM, as submitit detects it), ``"slurm"`` or ``"local"``."""
        self.block = block
        self.blocks = blocks or {}
        self.cluster = cluster
        self.remote = cluster != "local"  # jobs on other nodes: they need a tracking server
        self.threads = block.cpus_per_task or 1  # torch threads of a cell whose config sets none

    def describe(self) -> str:
        return f"slurm ({self.cluster or 'auto'}, folder {self.block.folder})"

    def run(self, tasks: list[CellTask], events: Events) -> list[CellOutcome]:
        try:
            import submitit
        except ImportError:
            raise DistreproError("--executor slurm needs submitit: pip install 'distrepro[slurm]'") from None
        jobs: dict[Any, CellTask] = {}
        try:
            for group in _groups(tasks, self.blocks, self.block):
                block = self.blocks.get(group[0].campaign, self.block)
                ex = submitit.AutoExecutor(folder=Path(block.folder) / "%j", cluster=self.cluster)
                ex.update_parameters(**job_parameters(block, group[0]))
                cells = [_slurm_task(t) for t in group]
                if block.array and len(group) > 1:
                    with ex.batch():
                        submitted = [ex.submit(run_cell_task_shipped, t) for t in cells]
                else:
                    submitted = [ex.submit(run_cell_task_shipped, t) for t in cells]
                jobs.update(zip(submitted, group, strict=True))
            return self._watch(jobs, events)
        except BaseException:
            for job in jobs:
                if not job.done():
                    try:
                        job.cancel(check=False)
                    except Exception:  # scancel itself failed: the job is named so it can be cancelled by hand
                        print(f"distrepro: could not cancel SLURM job {job.job_id}", file=sys.stderr)
            raise

    @staticmethod
    def _watch(jobs: dict[Any, CellTask], events: Events) -> list[CellOutcome]:
        pending = dict(jobs)
        running: set[str] = set()
        outcomes: list[CellOutcome] = []
        while pending:
            for job, task in list(pending.items()):
                if job.done():
                    del pending[job]
                    outcome = _outcome(job, task)
                    outcomes.append(outcome)
                    events("done", task, outcome)
                elif task.key not in running and job.state == "RUNNING":
                    running.add(task.key)
                    events("running", task, None)
            if pending:
                time.sleep(POLL_S)
        return outcomes


def _slurm_task(task: CellTask) -> CellTask:
    from dataclasses import replace

    return replace(task, executor="slurm")


def _groups(tasks: list[CellTask], blocks: dict[str, SlurmBlock], default: SlurmBlock) -> list[list[CellTask]]:
    """Tasks that share a job description (block, cores, engine), in order: one array or executor each."""
    groups: dict[str, list[CellTask]] = {}
    for t in tasks:
        block = blocks.get(t.campaign, default)
        key = f"{block.model_dump_json()}|{t.cpus}|{t.engine}|{t.world_size}"
        groups.setdefault(key, []).append(t)
    return list(groups.values())


def _outcome(job: Any, task: CellTask) -> CellOutcome:
    """The job's result, or FAILED with the end of what submitit reports (the job's error, its state)."""
    try:
        return job.result()  # type: ignore[no-any-return,unused-ignore]
    except Exception as exc:
        lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
        last = lines[-1].strip() if lines else type(exc).__name__
        return failed(task, f"SLURM job {job.job_id} ({job.state}): {last}")
