"""The speed work side by side: a checkout before it and one after, on the suite's own workloads, in one run.

    python benchmarks/speed_work.py [--before DIR] [--after DIR] [--reps N] [--steps N] [--only a,b,...]

The speed work is four changes: (1) batched replicas (``batched_replicas: false | auto | true``); (2) nothing computed
that is thrown away (gossip-only arms skip the backward, replicas' parameters in one flat buffer); (3) fixed costs
(per-rank metrics at the final evaluation only, cheaper report figures, the command's fast exit, a report stage that
counts); (4) the test suite (shared fixtures, idle OpenMP threads sleeping). Each item below runs them as a user does,
one fresh process per measurement:

* ``a1``, ``a2``: one A²CiD² cell (``reproduce acid --arms ARM --seeds 0 --jobs 1``, budget cut to ``--steps``): the
  lockstep arm ``ar-16`` (``ar_sgd``) and the gossip-only arm ``g64-base-r1`` (64 workers, gradients not applied);
* ``b``: Decent-DP's mid-scale ``accum_aer`` cell cut to ``--steps``, after the work with ``batched_replicas`` off
  and ``auto`` (the before checkout has no such field);
* ``c``: the report stage, ``report PAPER --exploratory --no-log`` on a tiny reproduction (every arm, seed 0,
  ``--steps``) that each side trains once into its own store (untimed set-up; kept and reused under ``--workdir``);
* ``d``: a one-step ``run configs/quickstart.yaml --set budget.steps=1 --set eval.times=1`` into a warm store;
* ``e``: a fixed pytest subset (in-process tests present in both checkouts; ``-m "not slow and not gpu"``, one
  process, no xdist).

Every repetition runs every item's variants in ABBA order (before, after, after, before; three variants: A B C C B
A) and pairs the k-th run of one variant with the k-th of another, so both see the same load. A run is timed as
``/usr/bin/time`` does: CPU = user + sys of the process and the children it waited for (``os.wait4``), beside wall
time and the 1-minute load average at its start and end. Both checkouts run with this interpreter (``--python``),
``PYTHONPATH`` set to the checkout (no ``DISTREPRO_*``, no ``OMP_WAIT_POLICY``: the tests set their own), and
bytecode compiled into a cache folder of their own (``PYTHONPYCACHEPREFIX``): a warm-up one-step run per side makes
the store (MLflow's migrations are not timed) and compiles the common path; what an item imports first is compiled
in its first run on each side, alike. The table gives medians and the before/after ratio per pair (> 1: after is
cheaper), median and range; the JSON (``benchmarks/out/speed_work_<UTC>.json``) has every run, each run's output is
in ``--workdir``. The default before is commit 90af388 (the state the speed work was measured against) as a git
worktree, made here if missing. The figures and the command are in BENCHMARKS.md ("The speed work side by side").
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from paired_runs import abba, rows, table

REPO = Path(__file__).resolve().parents[1]
BEFORE_COMMIT = "90af388"
DEFAULT_BEFORE = Path(tempfile.gettempdir()) / f"distrepro-before-{BEFORE_COMMIT}"
#: in-process test files both checkouts have (tests/engine and tests/training: OpenMP's idle threads show there)
TESTS = (
    "tests/engine/test_engine.py",
    "tests/training/test_models.py",
    "tests/training/test_optim.py",
    "tests/training/test_optimizers.py",
    "tests/training/test_partition.py",
)
QUICKSTART = ["configs/quickstart.yaml", "--set", "budget.steps=1", "--set", "eval.times=1", "--seeds", "0"]
ARM_AR16, ARM_G64 = ("--arms", "ar-16"), ("--arms", "g64-base-r1")
ARM_DECENTDP = ("--scale", "mid", "--arms", "accum_aer")
#: the after side's variants of ``b``: name, value of ``batched_replicas``
BATCHED = (("off", "false"), ("auto", "auto"))


@dataclass(frozen=True)
class Item:
    """One workload: its command after ``python -m``, and the after side's variants (name, extra arguments)."""

    key: str
    title: str
    store: str  # "warm": the side's warm store; "report": its tiny reproduction; "tests": a throwaway one
    args: tuple[str, ...]
    after: tuple[tuple[str, tuple[str, ...]], ...] = (("after", ()),)


def items(steps: int, paper: str, tests: Sequence[str]) -> list[Item]:
    """The five measurements (a split in two) with the budget cut to ``steps``."""
    budget = ("--set", f"budget={{steps: {steps}}}")
    cell = ("distrepro.cli", "reproduce", "--seeds", "0", *budget, "--no-report", "--jobs", "1", "--no-progress")
    batched = tuple((f"after, batched {m}", ("--set", f"batched_replicas={v}")) for m, v in BATCHED)
    report = ("distrepro.cli", "report", paper, "--exploratory", "--no-log", "--no-progress")
    pytest = ("pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow and not gpu", *tests)
    return [
        Item("a1", f"acid cell `ar-16` (lockstep, 16 workers), {steps} steps", "warm", (*cell, "acid", *ARM_AR16)),
        Item(
            "a2", f"acid cell `g64-base-r1` (gossip only, 64 workers), {steps} steps", "warm", (*cell, "acid", *ARM_G64)
        ),
        Item("b", f"decentdp mid `accum_aer` cell, {steps} steps", "warm", (*cell, "decentdp", *ARM_DECENTDP), batched),
        Item("c", f"report stage, `report {paper}` (every arm, seed 0, {steps} steps)", "report", report),
        Item(
            "d", "one-step `distrepro run` (quickstart)", "warm", ("distrepro.cli", "run", *QUICKSTART, "--no-progress")
        ),
        Item("e", f"pytest subset ({len(tests)} files, one process)", "tests", pytest),
    ]


def select(keys: Sequence[str], only: str | None) -> list[str]:
    """The item keys ``--only`` names (``a`` selects ``a1`` and ``a2``); ValueError for a name that selects none."""
    if not only:
        return list(keys)
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    unknown = [w for w in wanted if not any(k.startswith(w) for k in keys)]
    if unknown or not wanted:
        raise ValueError(f"--only: no item {', '.join(unknown) or repr(only)} (items: {', '.join(keys)})")
    return [k for k in keys if any(k.startswith(w) for w in wanted)]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--before",
        type=Path,
        default=None,
        help=f"checkout before (default: {BEFORE_COMMIT} as a worktree in {DEFAULT_BEFORE})",
    )
    parser.add_argument("--after", type=Path, default=REPO, help="checkout after (default: this one)")
    parser.add_argument("--reps", type=int, default=3, help="ABBA repetitions (two pairs each)")
    parser.add_argument(
        "--steps", type=int, default=40, help="training steps of the cells (a, b) and the tiny reproduction (c)"
    )
    parser.add_argument("--only", default=None, help="comma-separated items: a1,a2 (or a), b, c, d, e")
    parser.add_argument("--report-paper", default="acid", help="the paper of the report stage (c)")
    parser.add_argument(
        "--tests", nargs="+", default=list(TESTS), help="the pytest subset (e), paths in both checkouts"
    )
    parser.add_argument("--python", default=sys.executable, help="the interpreter both checkouts run with")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds before one run is killed")
    parser.add_argument(
        "--workdir", type=Path, default=REPO / "benchmarks" / "out" / "speed_work", help="stores, caches and logs"
    )
    args = parser.parse_args(argv)
    if args.reps < 1 or args.steps < 1:
        parser.error("--reps and --steps must be at least 1")
    try:
        args.items = select([i.key for i in items(args.steps, args.report_paper, args.tests)], args.only)
    except ValueError as err:
        parser.error(str(err))
    return args


@dataclass
class Side:
    """A checkout, its own warm store, report store and bytecode cache under the work folder."""

    label: str
    checkout: Path
    folder: Path
    python: str
    commit: str = field(default="")

    def store(self, kind: str, args: argparse.Namespace) -> Path:
        """The folder of a store: ``warm``, ``report`` (named by paper and steps, so a cached one fits) or ``tests``."""
        return self.folder / (f"report-{args.report_paper}-{args.steps}steps" if kind == "report" else kind)

    def env(self, store: Path | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DISTREPRO_")}
        for name in ("PYTHONDONTWRITEBYTECODE", "OMP_WAIT_POLICY"):  # bytecode cached; the tests' own OpenMP policy
            env.pop(name, None)
        env.update(PYTHONPATH=str(self.checkout), PYTHONPYCACHEPREFIX=str(self.folder / "pycache"))
        env.update(MLFLOW_DISABLE_TELEMETRY="true", PYTHONUNBUFFERED="1")
        if store is not None:
            env["MLFLOW_TRACKING_URI"] = f"sqlite:///{store}/mlflow.db"
        return env


def _kill_group(pid: int) -> None:
    """The time limit: the run and everything it started (its own session) are killed."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def timed(argv: list[str], cwd: Path, env: dict[str, str], log: Path, timeout: float) -> dict[str, Any]:
    """Run ``argv`` to its end; CPU of it and its children as /usr/bin/time counts it (``wait4``), wall, loads."""
    log.parent.mkdir(parents=True, exist_ok=True)
    load_start = os.getloadavg()[0]
    with log.open("wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        killer = threading.Timer(timeout, _kill_group, (proc.pid,))
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return {
        "rc": proc.returncode,
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
        "log": str(log),
    }


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True).stdout.strip()


def ensure_before(path: Path | None) -> Path:
    """The before checkout: the given folder, else 90af388 as a git worktree of this repository (made if missing)."""
    if path is not None:
        return path.resolve()
    if not (DEFAULT_BEFORE / "distrepro").is_dir():
        print(f"making the before checkout: git worktree add --detach {DEFAULT_BEFORE} {BEFORE_COMMIT}", flush=True)
        _git(REPO, "worktree", "add", "--detach", str(DEFAULT_BEFORE), BEFORE_COMMIT)
    return DEFAULT_BEFORE


def _tail(log: str) -> str:
    return "\n".join(Path(log).read_text(errors="replace").splitlines()[-5:])


def set_up(side: Side, args: argparse.Namespace, needs: set[str]) -> dict[str, Any]:
    """The side's warm store (a warm-up one-step run, which also fills the bytecode cache) and, for ``c``, its tiny
    reproduction (kept: a folder with ``done`` in it is reused). Untimed; their times go to the JSON."""
    made: dict[str, Any] = {}
    py, env = [side.python, "-m", "distrepro.cli"], side.env
    if "warm" in needs:
        store = side.store("warm", args)
        store.mkdir(parents=True, exist_ok=True)
        argv = [*py, "run", str(side.checkout / QUICKSTART[0]), *QUICKSTART[1:], "--no-progress"]
        print(f"{side.label} set-up: a warm-up one-step run (the store, the bytecode cache)", flush=True)
        made["warm-up"] = timed(argv, store, env(store), side.folder / "logs" / "warm-up.log", args.timeout)
    if "report" in needs:
        store = side.store("report", args)
        if not (store / "done").exists():
            store.mkdir(parents=True, exist_ok=True)
            argv = [*py, "reproduce", args.report_paper, "--seeds", "0", "--set", f"budget={{steps: {args.steps}}}"]
            argv += ["--no-report", "--jobs", "1", "--no-progress"]
            print(f"{side.label} set-up: the tiny reproduction of {args.report_paper} for the report stage", flush=True)
            made["tiny reproduction"] = timed(argv, store, env(store), store / "reproduce.log", args.timeout)
            if made["tiny reproduction"]["rc"] == 0:
                (store / "done").write_text(side.commit + "\n")
    for name, run in made.items():
        status = "ok" if run["rc"] == 0 else f"FAILED (exit {run['rc']}):\n{_tail(run['log'])}"
        print(
            f"{side.label} set-up, {name}: {run['cpu_s']:.1f} s CPU, {run['wall_s']:.1f} s wall, {status}", flush=True
        )
    return made


def measure(item: Item, side: Side, extra: tuple[str, ...], args: argparse.Namespace, tag: str) -> dict[str, Any]:
    """One timed run of ``item`` on ``side``: in its store's folder, the tests in the checkout (with a store of
    their own, so that nothing they log reaches the checkout)."""
    store = side.store(item.store, args)
    argv = [side.python, "-m", *item.args, *extra]
    if item.key == "d":
        argv[argv.index(QUICKSTART[0])] = str(side.checkout / QUICKSTART[0])
    if item.key == "c":
        argv += ["--out", str(side.folder / "reports" / tag)]
    store.mkdir(parents=True, exist_ok=True)
    cwd = side.checkout if item.store == "tests" else store
    run = timed(argv, cwd, side.env(store), side.folder / "logs" / f"{tag}.log", args.timeout)
    if item.key == "e" and (m := re.search(r"(\d+) passed", _tail(run["log"]))):
        run["tests_passed"] = int(m[1])
    return run


def run_all(args: argparse.Namespace, sides: dict[str, Side]) -> dict[str, list[dict[str, Any]]]:
    """Every repetition runs every chosen item's variants in ABBA order; returns each item's runs."""
    chosen = [i for i in items(args.steps, args.report_paper, args.tests) if i.key in args.items]
    results: dict[str, list[dict[str, Any]]] = {i.key: [] for i in chosen}
    for rep in range(args.reps):
        for item in chosen:
            extras = {"before": ()} | dict(item.after)
            for k, variant in enumerate(abba(list(extras))):
                side = sides["before" if variant == "before" else "after"]
                tag = f"{item.key}-rep{rep}-{k}-{variant.replace(', ', '-').replace(' ', '_')}"
                run: dict[str, Any] = {"item": item.key, "variant": variant, "rep": rep, "position": k}
                run |= measure(item, side, extras[variant], args, tag)
                results[item.key].append(run)
                status = "" if run["rc"] == 0 else f" FAILED (exit {run['rc']}):\n{_tail(run['log'])}"
                print(
                    f"rep {rep} {item.key} {variant}: {run['cpu_s']:.1f} s CPU, {run['wall_s']:.1f} s wall, "
                    f"load {run['load_start']:.1f} → {run['load_end']:.1f}{status}",
                    flush=True,
                )
    return results


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    checkouts = {"before": ensure_before(args.before), "after": args.after.resolve()}
    sides = {k: Side(k, c, (args.workdir / k).resolve(), args.python) for k, c in checkouts.items()}
    chosen = [i for i in items(args.steps, args.report_paper, args.tests) if i.key in args.items]
    needs = {i.store for i in chosen} | ({"warm"} if chosen else set())  # the warm-up fills the bytecode cache
    started, cpu0, load0, utc = time.perf_counter(), os.times(), os.getloadavg(), dt.datetime.now(dt.UTC)
    setup = {}
    for side in sides.values():
        side.commit = _git(side.checkout, "rev-parse", "HEAD") + (
            " (dirty)" if _git(side.checkout, "status", "--porcelain", "--untracked-files=no") else ""
        )
        setup[side.label] = set_up(side, args, needs)
    results = run_all(args, sides)
    cpu1, load1 = os.times(), os.getloadavg()
    table_rows = rows(results, {i.key: i.title for i in chosen})
    meta = {
        "utc_start": utc.isoformat(timespec="seconds"),
        "utc_end": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_start": load0,
        "load_end": load1,
        "wall_s": round(time.perf_counter() - started, 1),
        "cpu_s_children": round(
            cpu1.children_user + cpu1.children_system - cpu0.children_user - cpu0.children_system, 1
        ),
        "checkouts": {k: {"path": str(s.checkout), "commit": s.commit} for k, s in sides.items()},
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
    }
    print()
    print(table(table_rows))
    print(
        f"\n{meta['utc_start']} to {meta['utc_end']}, {meta['cpus']} CPUs, load average {load0[0]:.1f} at the start "
        f"and {load1[0]:.1f} at the end; {meta['wall_s']:.0f} s wall, {meta['cpu_s_children']:.0f} s CPU in all; "
        f"before {sides['before'].commit[:10]}, after {sides['after'].commit[:10]}"
    )
    out = REPO / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"speed_work_{utc.strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps({"meta": meta, "setup": setup, "rows": table_rows, "runs": results}, indent=1))
    print(f"raw numbers: {path}")


if __name__ == "__main__":
    main()
