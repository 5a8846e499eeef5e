"""The distributed engine's launcher: start one process per worker, watch them, collect the result.

``launcher: local`` (default) starts the ranks as subprocesses that rendezvous through a file in
a fresh temporary folder (no fixed port, so parallel runs and tests never collide);
``launcher: torchrun`` runs ``torchrun --standalone`` (which picks a free port) on this machine.
For several machines see ``docs/multinode.md``: every node runs ``torchrun`` (under ``srun``)
with the same ``python -m distrepro.engine.multiprocess.worker`` command.

Faults: if a rank exits with an error, or dies, the launcher kills the others at once and raises
:class:`~distrepro.errors.WorkerFailure` naming the rank; a rank that hangs makes its peers fail at
the collective timeout (``dist.timeout_s``), after which the hung rank is named and killed. Every
rank runs in its own process group and all of them are killed on the way out, so no process is
left behind (torchrun's agent is sent SIGTERM first, to end the workers it started in sessions of their
own). The campaign marks the MLflow run FAILED; on Ctrl-C or SIGTERM, KILLED.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from distrepro.engine.multiprocess.pacing import behind_message
from distrepro.engine.torch_threads import default_threads
from distrepro.errors import WorkerFailure
from distrepro.job.engine import RunSink
from distrepro.job.observer import RunObserver
from distrepro.job.resolve import Job
from distrepro.job.results import EvalRecord, RunResult

#: a launcher line for the ranks (``torchrun ... --nproc-per-node=N``) that replaces ``dist.launcher``: the job
#: script of a dist-engine cell under ``--executor slurm`` sets it, so the ranks start inside the job's allocation
TORCHRUN_ENV = "DISTREPRO_TORCHRUN"


def _worker_cmd(job_file: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "distrepro.engine.multiprocess.worker", "--job", str(job_file), "--out", str(out)]


def _read_status(out: Path, rank: int) -> dict[str, Any] | None:
    path = out / f"rank{rank}.status.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


#: seconds torchrun's agent gets to end its workers after SIGTERM (it waits on them; they die at once)
TORCHRUN_GRACE_S = 15.0


def _kill(procs: list[subprocess.Popen], grace_s: float = 0.0) -> None:
    """End each process's group. With ``grace_s``, SIGTERM first and up to that long to exit: torchrun's agent
    starts every worker in a session of its own and ends them on SIGTERM, where a SIGKILL of the agent would
    leave them running as orphans. Then SIGKILL for whatever is left."""
    if grace_s > 0:
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=10)


_PEER_ERRORS = ("closed by peer", "reset by peer", "timed out", "timeout", "connection refused", "broken pipe")


def _is_peer_error(message: str) -> bool:
    """Errors a rank gets because *another* rank failed (gloo connection loss, collective timeout)."""
    low = message.lower()
    return any(p in low for p in _PEER_ERRORS)


def diagnose(out: Path, codes: dict[int, int | None], world: int) -> tuple[int, str]:
    """Name the rank that caused a failure, from exit codes and status files.

    In order: a rank that died without a word (signal, crash), or exited 0 without one; a rank that raised an
    error of its own (not a lost connection or timeout caused by a peer), the earliest first; a rank that said
    nothing while the others timed out waiting (hung); else the earliest error.
    """
    statuses = {r: _read_status(out, r) for r in range(world)}
    died = [r for r, c in codes.items() if c is not None and c != 0 and (statuses[r] or {}).get("status") != "error"]
    if died:
        r = died[0]
        code = codes[r] or 0
        sig = f"signal {-code}" if code < 0 else f"exit code {code}"
        return r, f"rank {r} died ({sig}) without reporting an error"
    vanished = [r for r, c in codes.items() if c == 0 and statuses[r] is None]
    if vanished:  # exit 0 without a word: os._exit(0) in a plugin, while the others waited for it
        r = vanished[0]
        return r, f"rank {r} exited without finishing (exit code 0, no status written: os._exit in a plugin?)"
    errors = {r: s for r, s in statuses.items() if s and s.get("status") == "error"}
    own = sorted((s.get("time", 0.0), r) for r, s in errors.items() if not _is_peer_error(s["error"]))
    if own:
        r = own[0][1]
        return r, f"rank {r} raised {errors[r]['error']}"
    silent = [r for r in range(world) if statuses[r] is None]
    if errors and silent:
        return silent[0], f"rank {silent[0]} stopped responding (hung); ranks {sorted(errors)} timed out waiting for it"
    if errors:
        r = min(errors, key=lambda q: (errors[q].get("time", 0.0), q))
        return r, f"rank {r} raised {errors[r]['error']}"
    r = next((r for r, c in codes.items() if c not in (0, None)), 0)
    return r, f"rank {r} failed (exit code {codes.get(r)})"


class DistEngine:
    name = "dist"

    def run_cell(
        self,
        job: Job,
        sink: RunSink | None,
        progress: RunObserver | None = None,
        resume_from: Path | None = None,
    ) -> RunResult:
        """Launch the ranks for ``job``; rank 0 records into ``sink``'s run (reopened in its process); returns rank 0's
        result.

        With ``checkpoint.every_steps`` set, checkpoints go to ``checkpoint.dir/<run id>``;
        ``resume_from`` is a complete checkpoint folder to continue from.
        """
        cfg = job.config
        run_id = sink.run_id if sink is not None else None
        ckpt = (cfg.checkpoint.dir / run_id).resolve() if cfg.checkpoint.every_steps and run_id else None
        with tempfile.TemporaryDirectory(prefix="distrepro-dist-") as tmp:
            out = Path(tmp)
            job_file = out / "job.json"
            job_file.write_text(
                json.dumps(
                    {
                        "config": cfg.model_dump(mode="json"),
                        "seed": job.seed,
                        "source": None,
                        "run_id": run_id,
                        "checkpoint_dir": str(ckpt) if ckpt else None,
                        "resume_from": str(resume_from) if resume_from else None,
                    }
                )
            )
            if sink is not None:
                sink.flush()  # rank 0 writes to this run next; one writer at a time
                (out / "sink.pkl").write_bytes(pickle.dumps(sink.reopener()))
            world = job.world_size
            env = {**os.environ, "OMP_NUM_THREADS": str(default_threads(world)[0])}  # the host's CPUs, shared
            prefix = os.environ.get(TORCHRUN_ENV)  # set by a SLURM cell's job script (--executor slurm)
            torchrun = cfg.dist.launcher == "torchrun" or bool(prefix)
            if prefix:
                print(f"distrepro: starting the ranks with {TORCHRUN_ENV}: {prefix}", file=sys.stderr, flush=True)
            if torchrun:
                standalone = [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--standalone",
                    f"--nproc-per-node={world}",
                ]
                cmd = [
                    *(shlex.split(prefix) if prefix else standalone),
                    "-m",
                    "distrepro.engine.multiprocess.worker",
                    "--job",
                    str(job_file),
                    "--out",
                    str(out),
                ]
                procs = [subprocess.Popen(cmd, env=env, start_new_session=True)]
            else:
                init = f"file://{out / 'rendezvous'}"
                procs = [
                    subprocess.Popen(
                        [*_worker_cmd(job_file, out), "--rank", str(r), "--world-size", str(world), "--init", init],
                        env=env,
                        start_new_session=True,
                    )
                    for r in range(world)
                ]
            try:
                self._watch(procs, out, world, torchrun=torchrun, progress=progress)
            finally:  # also on Ctrl-C and SIGTERM (a KeyboardInterrupt here): no rank outlives the launcher
                _kill(procs, TORCHRUN_GRACE_S if torchrun else 0.0)
            result_file = out / "result.pkl"
            if not result_file.is_file():  # every rank ended 0 (os._exit(0) in a plugin) and rank 0 wrote nothing
                code = "" if torchrun else f" (exit code {procs[0].returncode})"
                raise WorkerFailure(
                    0, f"rank 0 exited without finishing{code}: it wrote no result (os._exit in a plugin?)"
                )
            result = pickle.loads(result_file.read_bytes())
            message = behind_message(result.pacing) if result.pacing else None
            if message:  # the run is kept: its math is real, only its wall-clock speeds are suspect
                print(f"distrepro: warning: {message}", file=sys.stderr, flush=True)
            return result

    def _watch(
        self, procs: list[subprocess.Popen], out: Path, world: int, torchrun: bool, progress: Any = None
    ) -> None:
        first_failure: float | None = None
        shown = 0
        while True:
            if progress is not None:
                shown = _forward_progress(out / "progress.json", progress, shown)
            codes = {i: p.poll() for i, p in enumerate(procs)}
            finished = {i for i, c in codes.items() if c == 0 or (c is not None and _said_ok(out, i, torchrun))}
            if len(finished) == len(procs):
                if progress is not None:  # what rank 0 wrote last (the final evaluation)
                    _forward_progress(out / "progress.json", progress, shown)
                _warn_teardown_crashes(codes)
                return
            failed = [i for i, c in codes.items() if c is not None and i not in finished]
            if failed and first_failure is None:
                first_failure = time.monotonic()
            if failed:
                # a rank failed: give the others a moment to write their status, then stop all.
                # Exit codes are read *before* killing: a rank still running then is a suspect (hung).
                running = [i for i, c in codes.items() if c is None]
                if not running or time.monotonic() - (first_failure or 0.0) > 2.0:
                    if torchrun:  # one agent process: per-rank outcome only from the status files
                        codes = {
                            r: (1 if (_read_status(out, r) or {}).get("status") == "error" else None)
                            for r in range(world)
                        }
                    _kill(procs, TORCHRUN_GRACE_S if torchrun else 0.0)
                    rank, msg = diagnose(out, codes, world)
                    if os.environ.get("DISTREPRO_DEBUG"):
                        for r in range(world):
                            print(f"[launcher] rank {r}: exit {codes.get(r)} status {_read_status(out, r)}", flush=True)
                    raise WorkerFailure(rank, msg)
            time.sleep(0.1)


def _said_ok(out: Path, rank: int, torchrun: bool) -> bool:
    """Whether ``rank`` reported success before exiting (torchrun: one agent, no per-rank exit code)."""
    return not torchrun and (_read_status(out, rank) or {}).get("status") == "ok"


def _warn_teardown_crashes(codes: dict[int, int | None]) -> None:
    """A rank that reported success and then died did so tearing down (a C++ extension's threads at
    exit, seen with DeepSpeed's): its work is complete and written, so the run stands; say so."""
    for rank, code in codes.items():
        if code not in (0, None):
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            print(
                f"distrepro: warning: rank {rank} died ({how}) after reporting success; its results are complete",
                file=sys.stderr,
                flush=True,
            )


def _forward_progress(path: Path, progress: Any, shown: int = 0) -> int:
    """Show rank 0's progress (written by :class:`ProgressFile`) in the launcher's display: the bar,
    and every evaluation after the first ``shown`` (one line each without a bar); returns how many
    evaluations have been shown."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return shown
    progress.on_progress(float(data["fraction"]), float(data["emulated_s"]))
    evals = data.get("evals", [])
    on_eval = getattr(progress, "on_eval", None)
    if on_eval is not None:
        for record in evals[shown:]:
            on_eval(EvalRecord(**record, workers=[]))
    return len(evals)


class ProgressFile:
    """Rank 0's observer that leaves its progress in a small file for the launcher: the fraction done
    (at most twice a second) and every evaluation so far (written at once)."""

    def __init__(self, path: Path) -> None:
        self.path, self._last = path, 0.0
        self.fraction, self.emulated_s = 0.0, 0.0
        self.evals: list[dict[str, Any]] = []

    def on_allocation(self, epoch: int, allocation: Any) -> None:
        pass

    def on_eval(self, record: EvalRecord) -> None:
        fields = ("step", "epoch", "samples", "emulated_s", "wall_s", "metrics", "final", "throttled_s")
        self.evals.append({k: getattr(record, k) for k in fields})
        self._write()

    def on_progress(self, fraction: float, emulated_s: float) -> None:
        self.fraction, self.emulated_s = fraction, emulated_s
        if time.monotonic() - self._last >= 0.5 or fraction >= 1.0:
            self._write()

    def _write(self) -> None:
        self._last = time.monotonic()
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"fraction": self.fraction, "emulated_s": self.emulated_s, "evals": self.evals}))
        tmp.replace(self.path)
