"""The ``slurm:`` block of a run config: how ``--executor slurm`` asks SLURM for each cell's job.

It says where a cell runs, not what it computes, so it is excluded from the config as logged
(``Field(exclude=True)`` on :class:`~distrepro.config.run_config.RunConfig`): the same campaign run on a
laptop and on a cluster has the same params, and ``--resume`` may continue it on another executor.
Command-line flags (``--slurm-partition`` ...) override it field by field.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class SlurmBlock(BaseModel):
    model_config = ConfigDict(extra="forbid")

    partition: str | None = None
    time_min: int = Field(default=60, gt=0)  # wall-clock limit of one cell's job, minutes
    gpus_per_node: int = Field(default=0, ge=0)  # for the cell (one node); NCCL ranks want one each
    cpus_per_task: int | None = Field(default=None, gt=0)  # default: the cores the cell occupies
    mem_gb: float | None = Field(default=None, gt=0)
    array: bool = False  # submit a campaign's cells as one job array instead of a job each
    array_parallelism: int = Field(default=64, gt=0)  # cells of an array running at once
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    setup: list[str] = Field(default_factory=list)  # shell lines run before the cell (module load, venv)
    folder: str = "slurm_jobs"  # submitit's folder (job scripts, logs, pickles): on a filesystem nodes share
    extra: dict[str, Any] = Field(default_factory=dict)  # further #SBATCH options, e.g. {mail-type: END}

    def merged(self, overrides: dict[str, Any]) -> SlurmBlock:
        """This block with the flags that were given (``None`` values are flags not given)."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return self.model_validate({**self.model_dump(), **given})
