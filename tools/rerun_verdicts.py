"""Re-run every verdict after a frozen input changed: fresh seeds registered, every reproduction run, RESULTS.md.

``distrepro results --check`` fails as soon as an input a pre-registration freezes changes (a paper.yaml, an arm's
config, a hardware profile, the emulator's error band, the emulator or claims code). The verdicts then have to be
re-earned on seeds no run has used, with the same design as before. This is the maintainers' procedure as one
tool, in two steps with a commit between them (a record must be committed before the runs it decides):

    python tools/rerun_verdicts.py register --first-seed 510 --store /data/store23    # then commit the records
    python tools/rerun_verdicts.py run --store /data/store23                          # every reproduction, RESULTS.md

``register`` rewrites every committed record (``methods/*/preregistration/<scale>.yaml``) with the same number
of seeds and the same looks, on seeds from ``--first-seed`` (``distrepro preregister`` refuses seeds the store's
runs already used). ``run`` runs each registered paper and scale (``distrepro reproduce``, the registered seeds by
default), in turn or as ``--chains N`` concurrent chains into the one store, each log in ``<store>/logs/``, then
writes RESULTS.md from the store and checks it. ``--papers`` and ``--scales`` narrow both steps (RESULTS.md is
written from the whole store, so a partial re-run belongs in the store that holds the other papers' runs).
``--dry-run`` prints the commands instead. Give each re-run a fresh store and seeds above every earlier range:
never register a seed range registered before.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Registration:
    """One committed record: which paper at which scale, on how many seeds, with which looks."""

    paper: str
    scale: str
    n: int
    looks: tuple[int, ...]

    def seeds(self, first: int) -> str:
        return f"{first}-{first + self.n - 1}"


def registrations(repo: Path = REPO) -> list[Registration]:
    """Every committed record, paper by paper, proxy before mid (the order the runs take)."""
    order = {"proxy": 0, "mid": 1, "gpu": 2, "paper": 3}
    found = []
    for path in sorted(repo.glob("methods/*/preregistration/*.yaml")):
        record = yaml.safe_load(path.read_text())
        sequential = record.get("sequential") or {}
        looks = tuple(sequential.get("looks") or ()) if sequential.get("design") == "pocock" else ()
        found.append(Registration(record["paper"], record["scale"], int(record["n"]), looks))
    return sorted(found, key=lambda r: (order.get(r.scale, 9), r.paper))


def selected(records: list[Registration], papers: str | None, scales: str | None) -> list[Registration]:
    """The records of the named papers and scales (all by default); a name no record has is an error."""
    out = records
    for field, wanted in (("paper", papers), ("scale", scales)):
        if wanted:
            names = {w.strip() for w in wanted.split(",") if w.strip()}
            known = {getattr(r, field) for r in records}
            if names - known:
                raise SystemExit(
                    f"--{field}s: no record for {', '.join(sorted(names - known))}; known: {', '.join(sorted(known))}"
                )
            out = [r for r in out if getattr(r, field) in names]
    return out


def register_commands(records: list[Registration], first_seed: int) -> list[list[str]]:
    """``distrepro preregister`` for every record, same design, seeds from ``first_seed``."""
    if first_seed < 100:
        raise SystemExit(f"--first-seed {first_seed}: confirmatory seeds start at 100 (below are exploratory)")
    out = []
    for r in records:
        cmd = ["distrepro", "preregister", r.paper, "--scale", r.scale, "--seeds", r.seeds(first_seed), "--replace"]
        if r.looks:
            cmd += ["--looks", ",".join(str(k) for k in r.looks)]
        out.append(cmd)
    return out


def run_commands(records: list[Registration]) -> list[list[str]]:
    """Every reproduction on its registered seeds, then RESULTS.md from the store and its check."""
    runs = [["distrepro", "reproduce", r.paper, "--scale", r.scale, "--no-progress"] for r in records]
    return [*runs, ["distrepro", "results"], ["distrepro", "results", "--check"]]


def log_name(index: int, cmd: list[str]) -> str:
    """``03-reproduce-qsr-proxy.log``: the step's number and its words, flags left out."""
    words = [a.lstrip("-") for a in cmd[1:] if a not in ("--scale", "--no-progress")]
    return "-".join([f"{index:02d}", *words]) + ".log"


def _run_one(index: int, cmd: list[str], env: dict[str, str], logs: Path | None) -> int:
    print("+", shlex.join(cmd), flush=True)
    argv = [sys.executable, "-m", "distrepro.cli", *cmd[1:]]  # this interpreter's distrepro, wherever PATH points
    if logs is None:
        return subprocess.call(argv, cwd=REPO, env=env)
    log = logs / log_name(index, cmd)
    with log.open("w") as fh:
        code = subprocess.call(argv, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
    print(f"  exit {code}, log {log}", flush=True)
    return code


def _execute(cmds: list[list[str]], store: Path, logs: Path | None, chains: int = 1) -> int:
    """The reproductions in ``chains`` concurrent chains (each in turn within its chain), then the rest in order;
    stops at the first failure (a chain finishes the command it is running)."""
    env = os.environ | {"MLFLOW_TRACKING_URI": f"sqlite:///{store.resolve() / 'mlflow.db'}"}
    numbered = list(enumerate(cmds, 1))
    parallel = [(i, c) for i, c in numbered if c[1] == "reproduce"] if chains > 1 else []
    failed: list[int] = []

    def chain(part: list[tuple[int, list[str]]]) -> None:
        for index, cmd in part:
            if failed:
                return
            code = _run_one(index, cmd, env, logs)
            if code != 0:
                failed.append(code)

    threads = [threading.Thread(target=chain, args=(parallel[k::chains],)) for k in range(chains if parallel else 0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        return failed[0]
    chain([(i, c) for i, c in numbered if (i, c) not in parallel])
    return failed[0] if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="Details: docs/contributing.md")
    sub = parser.add_subparsers(dest="step", required=True)
    reg = sub.add_parser("register", help="rewrite every record on fresh seeds, same design (then commit them)")
    reg.add_argument("--first-seed", type=int, required=True, help="first fresh seed (above every earlier range)")
    run = sub.add_parser("run", help="every registered reproduction into the store, then RESULTS.md")
    run.add_argument(
        "--chains", type=int, default=1, help="reproductions run as this many concurrent chains (default 1)"
    )
    for p in (reg, run):
        p.add_argument("--store", type=Path, required=True, help="folder of the MLflow store (fresh for a re-run)")
        p.add_argument("--papers", help="comma-separated paper ids (default: every registered paper)")
        p.add_argument("--scales", help="comma-separated scales (default: every registered scale)")
        p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv)
    records = selected(registrations(), args.papers, args.scales)
    if not records:
        print("no committed pre-registration under methods/*/preregistration/", file=sys.stderr)
        return 1
    if args.step == "register":
        cmds, logs = register_commands(records, args.first_seed), None
    else:
        cmds, logs = run_commands(records), args.store / "logs"
    if args.dry_run:
        print("\n".join(shlex.join(c) for c in cmds))
        return 0
    args.store.mkdir(parents=True, exist_ok=True)
    if logs is not None:
        logs.mkdir(exist_ok=True)
    return _execute(cmds, args.store, logs, getattr(args, "chains", 1))


if __name__ == "__main__":
    sys.exit(main())
