"""The command line's ``--executor`` flags (``run`` and ``reproduce``) and the typed executor they ask for.

The flags live here, with the rest of the command line; orchestration receives only what they mean, an
:class:`~distrepro.orchestration.executors.selection.ExecutorSpec`, checked here so that a flag that does not fit is
one line naming that flag. Light imports only: the parser is built at every start of ``distrepro``, before anything
heavy is imported. ``--slurm-*`` flags left out stay ``None`` and so keep the config's ``slurm:`` block values.
"""

from __future__ import annotations

import argparse

from distrepro.errors import ConfigError
from distrepro.orchestration.executors.selection import EXECUTORS, ExecutorSpec


def add_executor_flags(parser: argparse.ArgumentParser) -> None:
    """The ``--executor`` group of a subcommand that trains."""
    group = parser.add_argument_group("where the cells (arm x seed) run; see docs/multinode.md")
    group.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="local (default): processes on this machine; ray: a Ray cluster; slurm: a SLURM job per cell (submitit)",
    )
    group.add_argument(
        "--jobs",
        type=int,
        help="local: cells at once (default: DISTREPRO_JOBS, else cores / a cell's torch threads; 1 trains them "
        "in this process)",
    )
    group.add_argument(
        "--ray-address", help="ray: an existing cluster (e.g. HEAD:6379); default: a Ray started here for the command"
    )
    group.add_argument("--slurm-partition", help="slurm: partition (default: the config's slurm.partition)")
    group.add_argument("--slurm-time", type=int, metavar="MIN", help="slurm: time limit of one cell's job, minutes")
    group.add_argument("--slurm-gpus", type=int, metavar="N", help="slurm: GPUs per cell (one node)")
    group.add_argument("--slurm-cpus", type=int, metavar="N", help="slurm: CPUs per cell (default: its threads)")
    group.add_argument("--slurm-mem-gb", type=float, metavar="GB", help="slurm: memory per cell")
    group.add_argument(
        "--slurm-array", action="store_true", default=None, help="slurm: one job array for the cells, not a job each"
    )
    group.add_argument("--slurm-folder", help="slurm: submitit's folder, on a filesystem the nodes share")
    group.add_argument(
        "--slurm-cluster",
        choices=["slurm", "local"],
        help="slurm: 'local' runs the same jobs as processes here (a dry run of a SLURM campaign)",
    )


def executor_spec(args: argparse.Namespace) -> ExecutorSpec:
    """The executor the flags ask for; flags of another executor than the chosen one are an error."""
    kind = args.executor
    slurm = {
        "partition": args.slurm_partition,
        "time_min": args.slurm_time,
        "gpus_per_node": args.slurm_gpus,
        "cpus_per_task": args.slurm_cpus,
        "mem_gb": args.slurm_mem_gb,
        "array": args.slurm_array,
        "folder": args.slurm_folder,
    }
    given = ["--" + k.replace("_", "-") for k, v in vars(args).items() if k.startswith("slurm_") and v is not None]
    if kind != "slurm" and given:
        raise ConfigError(given[0], None, f"applies to --executor slurm, not --executor {kind}")
    if kind != "ray" and args.ray_address:
        raise ConfigError("--ray-address", None, f"applies to --executor ray, not --executor {kind}")
    if kind != "local" and args.jobs is not None:
        raise ConfigError("--jobs", None, f"applies to --executor local; {kind} schedules cells by their cores")
    if args.jobs is not None and args.jobs < 1:
        raise ConfigError("--jobs", None, f"needs at least 1 job, got {args.jobs}")
    if kind == "slurm":
        _check_slurm_flags(slurm)
    return ExecutorSpec(kind, args.jobs, args.ray_address, slurm, args.slurm_cluster)


#: the flag that sets each field of the slurm block
_SLURM_FLAGS = {
    "partition": "--slurm-partition",
    "time_min": "--slurm-time",
    "gpus_per_node": "--slurm-gpus",
    "cpus_per_task": "--slurm-cpus",
    "mem_gb": "--slurm-mem-gb",
    "array": "--slurm-array",
    "folder": "--slurm-folder",
}


def _check_slurm_flags(slurm: dict[str, object]) -> None:
    """The ``--slurm-*`` values against the config's slurm block rules: ``--slurm-time -5`` is one line naming
    the flag, not a pydantic ValidationError about ``SlurmBlock``."""
    from pydantic import ValidationError

    from distrepro.config.slurm_block import SlurmBlock
    from distrepro.errors import format_pydantic_error

    try:
        SlurmBlock.model_validate({k: v for k, v in slurm.items() if v is not None})
    except ValidationError as exc:
        error = format_pydantic_error(None, exc)
        field = (error.field or "").split(".")[0]
        raise ConfigError(_SLURM_FLAGS.get(field, "--slurm-*"), None, error.message) from None
