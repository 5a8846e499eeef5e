"""Set-up at a large number of devices K: ``distrepro plan`` and the in-process engine's start, timed.

    prlimit --as=6000000000 timeout 300 nice -n 10 python benchmarks/large_k.py [--ks 1000 2048 10000]
        [--what plan setup] [--trees before=/path/to/old/checkout now=.]

Why: set-up used to grow with K² (every worker recomputed the whole data partition, the budget check priced
every pair of ranks, the flow network was given a K×K table of intra-node links), so K = 2,048 took seconds and
a gigabyte before anything trained, and 10,000 devices would have taken minutes. A profile of K devices must
plan and start in time linear in K.

For each K a profile of K RTX 3090s, 8 per node (``K/8`` nodes; the last node holds the rest), is written to a
temporary plugin root with a config: AR-SGD (the default iid-shard allocation), a synthetic dataset of 4 images
per worker (8x8 pixels, 1 channel), a ``small_cnn`` of hidden width 1 (about 200 parameters: K replicas of the
default 100k-parameter model would be the memory, not the set-up), batch 2 per worker, one step. Each measured
part runs in a fresh child process (so peak RSS is the part's own, and imports are paid in each):

* ``plan``: ``distrepro plan CONFIG --json`` (the job built as a run would, the budget check, the time
  estimate).
* ``setup``: the job built, the in-process engine's transport and harness (K model replicas, K workers), and
  the first allocation's K data streams: everything before the first training step.

The set-up child prints each phase's CPU seconds and peak RSS so far to stderr as it ends (so a part ended by
the timeout still says how far it got). Each line reports wall seconds, CPU seconds (user + system of the child,
from ``wait4``), its peak resident set (``ru_maxrss``) and the 1-minute load average before it. ``--trees`` runs
each part once per checkout, in turn (paired: the same load, the same profile files), which is how the before/after
figures were taken. Run it under an address-space limit and a timeout (as above): a step that is still quadratic
then fails fast instead of taking the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PER_NODE = 8

#: one RTX 3090 of ``hardware_profiles/qsr-64gpu.yaml`` (same figures, its sources), on the quickstart's workload
_DEVICE = """      - name: rtx3090
        kind: gpu
        count: {count}
        memory_gib: 24
        throughput_samples_per_s: {{resnet18_cifar_32: 3400}}
        effective_flops_per_s: 1.1416e13
        source: "[E] as hardware_profiles/hetero-2fast-2slow.yaml (RTX 3090 FP32, resnet18_cifar_32)"
"""

_NETWORK = """network:
  intra_node: {latency_us: 15, bandwidth_gbytes_per_s: 8, source: "[E] as hardware_profiles/qsr-64gpu.yaml"}
  inter_node: {latency_us: 50, bandwidth_gbytes_per_s: 2.8, source: "[E] as hardware_profiles/qsr-64gpu.yaml"}
"""

_SETUP = """
import json, resource, sys

def phase(name):  # on stderr as it happens: a part ended by the timeout still shows how far it got
    usage = resource.getrusage(resource.RUSAGE_SELF)
    row = {"phase": name, "cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "rss_mb": usage.ru_maxrss // 1024}
    print(json.dumps(row), file=sys.stderr, flush=True)

from distrepro.config.run_config import load_config
from distrepro.engine.inprocess.run import InProcessTransport
from distrepro.engine.loop import Harness
from distrepro.orchestration.budget_check import check_budget
from distrepro.job.resolve import build_job

phase("imports")
path = sys.argv[1]
job = build_job(load_config(path), 0, path)
phase("job")
check_budget(job, path)
phase("budget check")
transport = InProcessTransport(job)
phase("transport (K replicas)")
harness = Harness(job, transport)
phase("harness (K workers)")
harness._set_allocation(job.allocate(0))
phase("allocation and K streams")
assert len(harness.slots) == job.world_size
print(sum(1 for slot in harness.slots if slot.stream is not None))
"""


def write_root(root: Path, k: int) -> Path:
    """A plugin root holding a K-device profile and a config that runs on it; returns the config's path."""
    (root / "hardware_profiles").mkdir(parents=True)
    (root / "configs").mkdir()
    lines = ["schema_version: 2", f"name: large-k{k}", f"description: {k} RTX 3090s, {PER_NODE} per node", "nodes:"]
    for node, first in enumerate(range(0, k, PER_NODE)):
        lines += [f"  - name: n{node}", "    devices:", _DEVICE.format(count=min(PER_NODE, k - first)).rstrip("\n")]
    (root / "hardware_profiles" / f"large-k{k}.yaml").write_text("\n".join(lines) + "\n" + _NETWORK)
    config = root / "configs" / f"large-k{k}.yaml"
    config.write_text(
        f"name: large-k{k}\nmethod: ar_sgd\nmethod_params: {{lr: 0.05}}\nprofile: large-k{k}\n"
        "dataset:\n  name: synthetic\n"
        f"  params: {{num_classes: 2, image_size: 8, channels: 1, train_size: {4 * k}, test_size: 64}}\n"
        "model: {name: small_cnn, params: {hidden: 1}}\nbatch_size: 2\nemulated_workload: resnet18_cifar_32\n"
        "budget: {steps: 1}\neval: {times: 1}\nseeds: [0]\ntorch_threads: 1\n"
    )
    return config


def measure(argv: list[str], env: dict[str, str]) -> dict[str, object]:
    """Run ``argv`` as a child; its wall and CPU seconds, peak RSS and exit status."""
    load = os.getloadavg()[0]
    started = time.monotonic()
    with tempfile.TemporaryFile() as out:  # a file: a pipe would fill and block; stderr is this process's own
        proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=out)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        out.seek(0)
        size = len(out.read())
    return {
        "rc": os.waitstatus_to_exitcode(status),
        "stdout_bytes": size,
        "wall_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "load1": round(load, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[1000, 2048, 10000])
    parser.add_argument("--what", nargs="+", choices=["plan", "setup"], default=["plan", "setup"])
    parser.add_argument(
        "--trees",
        nargs="+",
        default=[f"now={REPO}"],
        metavar="LABEL=CHECKOUT",
        help="checkouts whose distrepro the children import, alternated part by part (e.g. before=/path/to/main)",
    )
    args = parser.parse_args()
    trees = dict(tree.split("=", 1) for tree in args.trees)
    for k in args.ks:
        with tempfile.TemporaryDirectory(prefix=f"large-k{k}-") as tmp:
            config = write_root(Path(tmp), k)
            for what in args.what:
                argv = [sys.executable, "-m", "distrepro.cli", "plan", str(config), "--json"]
                if what == "setup":
                    argv = [sys.executable, "-c", _SETUP, str(config)]
                for label, tree in trees.items():
                    env = {**os.environ, "DISTREPRO_PATH": tmp, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/mlflow.db"}
                    env["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")]))
                    print(json.dumps({"k": k, "what": what, "tree": label, **measure(argv, env)}), flush=True)


if __name__ == "__main__":
    main()
