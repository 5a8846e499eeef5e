"""The table of hostile inputs of issue 27: each row a command a careless or hostile user runs, with the one
line it must print and the exit status it must end with (:mod:`test_hostile_inputs` runs them).

:func:`write_inputs` writes every file the rows read (configs with YAML oddities, broken hardware profiles,
a dataset plugin that raises, an image folder holding a text file) into one folder; :func:`cases` lists the
rows. A row with ``trains=True`` is decided only once the job is built or the run has started (a dataset, a
profile's emulated time, a data file), so it imports torch; the others answer before.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tiny_config
import yaml
from imagefolders import write_image_folder

REPO = Path(__file__).resolve().parents[2]

#: the shared tiny config, named (first, as the rows' line numbers count it) and two steps long
TINY: dict[str, Any] = {"name": "tiny", **tiny_config.TINY, "budget": {"steps": 2}}


@dataclass(frozen=True)
class Case:
    """One row: the arguments after ``distrepro``, what the line must hold, the exit status."""

    id: str
    argv: tuple[str, ...]
    fragments: tuple[str, ...]
    rc: int = 2
    env: dict[str, str] = field(default_factory=dict)
    trains: bool = False  # decided after torch is imported (job built, or mid-run)
    late: bool = False  # arises while training: may take longer than what is decided before
    debug: bool = False  # run with --debug: the traceback comes first, then the same line


def _profile(root: Path, name: str, change: Callable[[dict[str, Any]], None], stem: str | None = None) -> Path:
    """A copy of the shipped ``homogeneous-4`` under ``root/hardware_profiles``, changed by ``change``; its
    plausible ranges are dropped, since they would refuse an absurd figure before the check under test."""
    data = yaml.safe_load((REPO / "hardware_profiles" / "homogeneous-4.yaml").read_text(encoding="utf-8"))
    data["name"] = name
    for link in data["network"].values():
        if isinstance(link, dict):
            link.pop("ranges", None)
    for device in data["nodes"][0]["devices"]:
        device.pop("ranges", None)
    change(data)
    path = root / "hardware_profiles" / f"{stem or name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _crawling(data: dict[str, Any]) -> None:
    device = data["nodes"][0]["devices"][0]
    device["effective_flops_per_s"] = 1e-300
    device["throughput_samples_per_s"] = {k: 1e-300 for k in device.get("throughput_samples_per_s", {})}


#: a pre-registration record as ``distrepro preregister`` writes it (round 5, issue 47: records checked before trusted)
RECORD: dict[str, Any] = {
    "scale": "proxy",
    "date": "2026-11-27T01:00:00Z",
    "commit": "unknown (not a git checkout)",
    "claims_file": "paper.yaml",
    "claims_sha256": "0" * 64,
    "seeds": [100, 101],
    "n": 2,
    "sequential": {"design": "fixed", "n": 2, "interval": 0.95},
    "claims": {"fewer-bytes": {"sha256": "0" * 64, "kind": "ordering", "decided_by": "measurement", "min_seeds": 2}},
}


def _registered_paper(root: Path, name: str, **changes: Any) -> Path:
    """Paper ``name`` of two shipped methods under ``root/methods/<name>`` with a record at proxy, changed by
    ``changes``."""
    folder = root / "methods" / name
    (folder / "preregistration").mkdir(parents=True)
    claim = {
        "id": "fewer-bytes", "kind": "ordering", "arms": ["sync", "local"], "metric": "comm/bytes_total",
        "direction": "min", "source": {"kind": "text", "quote": "fewer bytes"}, "evidence": "derived",
    }  # fmt: skip
    spec = {
        "kind": "reproduction",
        "citation": {"id": name, "title": "A paper with a record"},
        "setup": {
            "profile": "homogeneous-4",
            "baseline": "sync",
            "arms": {"sync": {"method": "ar_sgd"}, "local": {"method": "local_sgd"}},
        },
        "claims": [claim],
    }
    (folder / "paper.yaml").write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    record = folder / "preregistration" / "proxy.yaml"
    record.write_text(yaml.safe_dump({"paper": name, **RECORD, **changes}, sort_keys=False), encoding="utf-8")
    return record


def _config(path: Path, extra: str = "", **changes: Any) -> Path:
    path.write_text(yaml.safe_dump({**TINY, **changes}, sort_keys=False) + extra, encoding="utf-8")
    return path


def write_inputs(tmp: Path) -> dict[str, Path]:
    """Every file the rows read, under ``tmp``; the paths by name."""
    root = tmp / "root"
    (root / "datasets").mkdir(parents=True)
    anchors = ["  a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    anchors += [f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    paths = {
        "root": root,
        "tiny": _config(tmp / "tiny.yaml"),
        # ten nested aliases of ten: 10^10 values once expanded ("billion laughs")
        "bomb": _config(tmp / "bomb.yaml", "x-anchors:\n" + "\n".join(anchors) + "\n"),
        "deep": _config(tmp / "deep.yaml", "method_params: {x: " + "[" * 5000 + "]" * 5000 + "}\n"),
        # a second method_params further down would silently replace the first
        "dup": _config(tmp / "dup.yaml", "method_params: {lr: 0.1}\nseeds: [0]\nmethod_params: {momentum: 0.9}\n"),
        "images": _config(
            tmp / "images.yaml",
            dataset={
                "name": "imagenet100",
                "root": str(tmp / "in100"),
                "params": {"image_size": 8, "strict_classes": False},  # two class folders, not a hundred
            },
            batch_size=4,
        ),
    }
    _profile(root, "tiny-bandwidth", lambda d: d["network"]["intra_node"].update(bandwidth_gbytes_per_s=1e-300))
    _profile(root, "huge-latency", lambda d: d["network"]["intra_node"].update(latency_us=1e300))
    _profile(root, "crawling", _crawling)
    _profile(root, "billion-devices", lambda d: d["nodes"][0]["devices"][0].update(count=1_000_000_000))
    # 100,000 nodes would be copied before the rank limit was checked (2,000,000 took 5.4 GB)
    _profile(root, "many-nodes", lambda d: d["nodes"][0].update(count=100_000))
    paths["misnamed"] = _profile(root, "inner-name", lambda d: None, stem="outer-name")
    paths["boom"] = root / "datasets" / "boom.py"
    paths["boom"].write_text(
        "from pydantic import BaseModel\n\nNAME = 'boom'\nDESCRIPTION = 'a dataset whose build raises'\n\n\n"
        "class Params(BaseModel):\n    pass\n\n\n"
        "def build(params, root, seed):\n    raise ValueError('the boom dataset always fails')\n",
        encoding="utf-8",
    )
    # a method that leaves by sys.exit(0) after its first step: its runs must end FAILED, never FINISHED
    text = (REPO / "methods" / "ar_sgd" / "method.py").read_text(encoding="utf-8")
    head = "    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:\n"
    exits = head + "        if int(ctx.train_state['step']) >= 1:\n            raise SystemExit(0)\n"
    (root / "methods" / "exiting").mkdir(parents=True)
    (root / "methods" / "exiting" / "method.py").write_text(
        text.replace(head, exits).replace('name = "ar_sgd"', 'name = "exiting"'), encoding="utf-8"
    )
    paths["empty_paper"] = tmp / "eroot" / "methods" / "emptyp" / "paper.yaml"  # a paper.yaml with nothing in it
    paths["empty_paper"].parent.mkdir(parents=True)
    paths["empty_paper"].write_text("", encoding="utf-8")
    # a method whose train_step blocks for ever after its first step: the in-process watchdog must fail it
    blocks = (
        head
        + "        if int(ctx.train_state['step']) >= 1:\n            import threading\n"
        + ("            threading.Event().wait()\n")
    )
    (root / "methods" / "blocking").mkdir(parents=True)
    (root / "methods" / "blocking" / "method.py").write_text(
        text.replace(head, blocks).replace('name = "ar_sgd"', 'name = "blocking"'), encoding="utf-8"
    )
    # a method that swallows the watchdog: it catches Exception around a wait that never ends, again and again
    swallows = (
        head
        + "        if int(ctx.train_state['step']) >= 1:\n            import threading\n"
        + "            while True:\n                try:\n                    threading.Event().wait()\n"
        + "                except Exception:\n                    pass\n"
    )
    (root / "methods" / "swallowing").mkdir(parents=True)
    (root / "methods" / "swallowing" / "method.py").write_text(
        text.replace(head, swallows).replace('name = "ar_sgd"', 'name = "swallowing"'), encoding="utf-8"
    )
    # a method whose process leaves by os._exit(0) after its first step: no exception, no exit hook, no report
    leaves = head + "        if int(ctx.train_state['step']) >= 1:\n            import os\n            os._exit(0)\n"
    (root / "methods" / "vanishing").mkdir(parents=True)
    (root / "methods" / "vanishing" / "method.py").write_text(
        text.replace(head, leaves).replace('name = "ar_sgd"', 'name = "vanishing"'), encoding="utf-8"
    )
    # round 4 (issue 34): a config path that is no file; an image folder whose class folders hold nothing
    (tmp / "config-folder").mkdir()
    os.mkfifo(tmp / "config-fifo")
    (tmp / "config-loop").symlink_to(tmp / "config-loop")
    for split in ("train", "val"):
        (tmp / "in100-empty" / split / "n01440764").mkdir(parents=True)
    paths["empty_images"] = _config(
        tmp / "empty-images.yaml",
        dataset={
            "name": "imagenet100",
            "root": str(tmp / "in100-empty"),
            "params": {"image_size": 8, "strict_classes": False},
        },
    )
    # round 5 (issue 47): records that used to be printed as valid
    paths["record_root"] = tmp / "rroot"  # a root of its own: no other row meets these papers
    paths["record_seeds"] = _registered_paper(paths["record_root"], "rec-seeds", seeds="abc")
    paths["record_date"] = _registered_paper(paths["record_root"], "rec-date", date="2099-01-01T00:00:00Z")
    paths["record_claims"] = _registered_paper(paths["record_root"], "rec-claims", claims=[1, 2])
    paths["record_paper"] = _registered_paper(paths["record_root"], "rec-paper", paper="cadp")
    # round 5 (issue 47): a list where ctx.comm.all_reduce takes one tensor; an arm's config outside every root
    listing = head + "        ctx.comm.all_reduce(list(api.grads_of(ctx.model)))\n"
    (root / "methods" / "listing").mkdir(parents=True)
    (root / "methods" / "listing" / "method.py").write_text(
        text.replace(head, listing).replace('name = "ar_sgd"', 'name = "listing"'), encoding="utf-8"
    )
    (root / "methods" / "escaping").mkdir(parents=True)
    (root / "methods" / "escaping" / "method.py").write_text(
        text.replace('name = "ar_sgd"', 'name = "escaping"'), encoding="utf-8"
    )
    escape = "config: " + "../" * 12 + "etc/passwd"  # read from outside every root
    (root / "methods" / "escaping" / "paper.yaml").write_text(
        "kind: reproduction\ncitation: {id: escaping, title: An escaping arm}\n"
        "setup: {profile: homogeneous-4, min_seeds: 2, baseline: a, arms: "
        f"{{a: {{method: ar_sgd, {escape}}}, b: {{method: local_sgd, {escape}}}}}}}\n"
        "claims:\n  - {id: c, kind: relative_improvement, arm: b, baseline: a, metric: comm/bytes_total, "
        "direction: min, form: ratio, claimed: 2.0, accept: {rel_tolerance: 0.2}, evidence: derived, "
        "source: {kind: text, quote: q}}\n",
        encoding="utf-8",
    )
    write_image_folder(tmp / "in100", ["n01440764", "n01443537"], 4, size=(12, 12))
    paths["not_an_image"] = tmp / "in100" / "val" / "n01443537" / "broken.JPEG"
    paths["not_an_image"].write_text("this is not an image\n", encoding="utf-8")
    return paths


def cases(p: dict[str, Path]) -> list[Case]:
    """The rows, in the order of the issue's list."""
    run = ("run", str(p["tiny"]), "--no-progress")
    root = ("--root", str(p["root"]))
    store = "more than the tracking store can record"
    first = len(yaml.safe_dump(TINY, sort_keys=False).splitlines()) + 1  # the dup config's two method_params
    second = first + 2
    boom = ("--set", "dataset.name=boom", "--set", "dataset.params={}")
    records = ("--root", str(p["record_root"]), "--scale", "proxy")
    return [
        # budgets: not finite (decided as the config is read), or more steps than a run can take (once built)
        Case("budget-epochs-inf", (*run, "--set", "budget.epochs=.inf"), ("'budget.epochs'", "finite number, got inf")),
        Case(
            "budget-emulated-inf",
            (*run, "--set", "budget.emulated_seconds=.inf"),
            ("'budget.emulated_seconds'", "finite number, got inf"),
        ),
        Case(
            "budget-epochs-1e30",
            (*run, "--set", "budget.epochs=1e30"),
            ("'budget.epochs'", "1e+30 epochs is 2e+30 steps", "more than the 1e+09 a run may take"),
            trains=True,
        ),
        Case(
            "budget-steps-1e23",
            (*run, "--set", "budget.steps=99999999999999999999999"),
            ("'budget.steps'", "less than or equal to 1000000000, got 99999999999999999999999"),
        ),
        # YAML structure
        Case("yaml-alias-bomb", ("run", str(p["bomb"]), "--no-progress"), (str(p["bomb"]), "alias bomb")),
        Case("yaml-deep-nesting", ("run", str(p["deep"]), "--no-progress"), (str(p["deep"]), "nested deeper than 64")),
        Case(
            "yaml-duplicate-key",
            ("run", str(p["dup"]), "--no-progress"),
            ("field 'method_params'", f"duplicate key 'method_params' at line {second} (first at line {first})"),
        ),
        Case(
            "set-deep-value", (*run, "--set", "method_params.x=" + "[" * 3000 + "]" * 3000), ("--set", "nested deeper")
        ),
        # seeds: indices, decimal, bounded
        Case("seeds-huge", (*run, "--seeds", "99999999999999999999999"), ("--seeds", "above 2147483647")),
        Case("seeds-bool", (*run, "--seeds", "true"), ("--seeds", "'true' is not a seed index")),
        Case("seeds-hex", (*run, "--seeds", "0x10"), ("--seeds", "'0x10' is not a seed index")),
        # hardware profiles: figures whose emulated time the store cannot hold; a name that is not the file's
        Case(
            "profile-tiny-bandwidth",
            (*run, *root, "--set", "profile=tiny-bandwidth"),
            ("tiny-bandwidth.yaml", "field 'network.intra_node'", "1e-300 GB/s", store),
            trains=True,
        ),
        Case(
            "profile-huge-latency",
            (*run, *root, "--set", "profile=huge-latency"),
            ("huge-latency.yaml", "field 'network.intra_node'", "1e+300 us", store),
            trains=True,
        ),
        Case(
            "profile-tiny-throughput",
            (*run, *root, "--set", "profile=crawling"),
            ("crawling.yaml", "field 'nodes[0].devices[0]'", "samples/s", store),
            trains=True,
        ),
        Case(
            "profile-name-not-file-name",
            (*run, *root, "--set", "profile=outer-name"),
            (str(p["misnamed"]), "field 'name'", "'inner-name' differs from the file name 'outer-name'"),
            trains=True,
        ),
        # plugins and data files
        Case(
            "dataset-plugin-raises",
            (*run, *root, *boom),
            (f"dataset plugin boom ({p['boom']}) raised: ValueError: the boom dataset always fails",),
            trains=True,
        ),
        Case(
            "dataset-plugin-raises-debug",
            (*run, *root, *boom, "--debug"),
            (f"dataset plugin boom ({p['boom']}) raised: ValueError: the boom dataset always fails",),
            trains=True,
            debug=True,
        ),
        Case(
            "image-folder-with-a-text-file",
            ("run", str(p["images"]), "--no-progress"),
            (f"not an image: {p['not_an_image']}",),
            trains=True,
            late=True,
        ),
        # round 4 (issue 34): names that become paths, strict types, empty or unknown arguments
        Case(
            "paper-escapes-reports",
            (*run, "--set", "paper=../../../../escaped"),
            ("field 'paper'", "not a valid name", "'../../../../escaped'"),
        ),
        Case(
            "report-paper-escapes", ("report", "../../escaped", "--no-log"), ("PAPER", "'../../escaped'", "not a valid")
        ),
        Case("campaign-name-with-a-slash", (*run, "--set", "name=a/../b"), ("field 'name'", "not a valid name")),
        Case("batch-size-true", (*run, "--set", "batch_size=true"), ("field 'batch_size'", "not the boolean true")),
        Case("steps-true", (*run, "--set", "budget.steps=true"), ("field 'budget.steps'", "not the boolean true")),
        Case("seeds-empty", (*run, "--seeds", ""), ("--seeds", "no seed index given")),
        Case("extras-unknown-paper", ("extras", "nosuch"), ("unknown paper 'nosuch'",)),
        Case("extras-unknown-arm", ("extras", "cadp", "nosuch"), ("field 'setup.arms'", "unknown arm(s) ['nosuch']")),
        Case(
            "slurm-time-negative",
            (*run, "--executor", "slurm", "--slurm-time", "-5"),
            ("--slurm-time", "greater than 0, got -5"),
        ),
        Case(
            "paper-yaml-empty",
            ("report", "cadp", "--no-log", "--root", str(p["empty_paper"].parent.parent.parent)),
            (str(p["empty_paper"]), "field 'citation.id'", "missing"),
        ),
        Case(
            "method-blocks-for-ever",
            (*run, *root, "--set", "method=blocking", "--set", "dist.timeout_s=3", "--jobs", "1"),
            ("worker rank 0 failed", "no worker made progress for 3 s (dist.timeout_s)"),
            trains=True,
        ),
        Case(
            "method-swallows-the-watchdog",
            (*run, *root, "--set", "method=swallowing", "--set", "dist.timeout_s=3", "--jobs", "1"),
            ("worker rank 0 failed", "no worker made progress for 3 s (dist.timeout_s)"),
            trains=True,
        ),
        # hangs and bombs: budgets, evaluation schedules, batches, threads and devices bounded before training
        Case(
            "budget-emulated-1e-300",
            (*run, "--set", "budget.emulated_seconds=1e-300"),
            ("field 'budget.emulated_seconds'", "greater than or equal to 0.000001"),
        ),
        Case("budget-epochs-1e-300", (*run, "--set", "budget.epochs=1e-300"), ("field 'budget.epochs'", "0.000001")),
        Case("eval-times-huge", (*run, "--set", "eval.times=1000000000"), ("field 'eval.times'", "100000")),
        Case(
            "batch-size-1e12",
            (*run, "--set", "batch_size=1000000000000"),
            ("field 'batch_size'", "larger than the whole training set (64 samples)"),
            trains=True,
        ),
        Case("torch-threads-1e5", (*run, "--set", "torch_threads=100000"), ("field 'torch_threads'", "1024")),
        Case(
            "profile-billion-devices",
            (*run, *root, "--set", "profile=billion-devices"),
            ("billion-devices.yaml", "16384"),
            trains=True,
        ),
        Case(
            "profile-node-count-huge",
            (*run, *root, "--set", "profile=many-nodes"),
            ("many-nodes.yaml", "field 'nodes'", "nodes[0].count: 100000 node(s)", "16384 ranks"),
            trains=True,
        ),
        # round 4 (issue 34): lines that name the file, field or flag
        Case("out-unwritable", ("results", "--out", "/proc/nope/R.md"), ("--out /proc/nope/R.md", "cannot write")),
        Case(
            "report-out-unwritable",
            ("report", "cadp", "--no-log", "--out", "/proc/nope/report"),
            ("--out /proc/nope/report", "cannot write there"),
        ),
        Case(
            "model-name-unknown",
            (*run, "--set", "model.name=nosuch"),
            (f"{p['tiny']}: field 'model.name'", "unknown model 'nosuch'"),
            trains=True,
        ),
        Case("dataset-empty", (*run, "--set", "dataset.params.train_size=0"), ("field 'dataset.params.train_size'",)),
        Case(
            "dataset-empty-class-folders",
            ("run", str(p["empty_images"]), "--no-progress"),
            (str(p["empty_images"]), "field 'dataset.root'", "no valid file"),
            trains=True,
        ),
        Case("config-is-a-folder", ("run", str(p["root"].parent / "config-folder")), ("is a folder, not a file",)),
        Case("config-is-a-fifo", ("run", str(p["root"].parent / "config-fifo")), ("not a regular file (a FIFO",)),
        Case(
            "config-is-a-symlink-loop",
            ("run", str(p["root"].parent / "config-loop")),
            ("Too many levels of symbolic links",),
        ),
        # round 5 (issue 47): a pre-registration record is checked before a plan, a reproduction or a report reads it
        Case(
            "record-seeds-not-seeds",
            ("plan", "rec-seeds", *records),
            (str(p["record_seeds"]), "field 'seeds'", "got 'abc'"),
        ),
        Case(
            "record-date-in-the-future",
            ("plan", "rec-date", *records),
            (str(p["record_date"]), "field 'date'", "2099-01-01T00:00:00Z is in the future"),
        ),
        Case(
            "record-claims-a-list",
            ("plan", "rec-claims", *records),
            (str(p["record_claims"]), "field 'claims'", "mapping of claim id", "got [1, 2]"),
        ),
        Case(
            "record-of-another-paper",
            ("plan", "rec-paper", *records),
            (str(p["record_paper"]), "field 'paper'", "'cadp' is not the paper of", "citation.id 'rec-paper'"),
        ),
        # tracking stores: one line before torch
        Case(
            "store-under-proc",
            run,
            ("/proc/nope", "cannot create it"),
            env={"MLFLOW_TRACKING_URI": "sqlite:////proc/nope/m.db"},
        ),
        Case("store-in-memory", run, ("in memory", "keeps nothing"), env={"MLFLOW_TRACKING_URI": "sqlite:///:memory:"}),
        Case(
            "store-folder",
            run,
            ("MLFLOW_ALLOW_FILE_STORE=true",),
            env={"MLFLOW_TRACKING_URI": f"file://{p['root']}/mlruns"},
        ),
        Case(
            "store-database-without-driver",
            run,
            ("database driver", "u:***@"),
            env={"MLFLOW_TRACKING_URI": "mysql+pymysql://u:secret@127.0.0.1:9/db"},
        ),
        # round 5 (issue 47): lines that name the flag, the file or the call
        Case(
            "looks-not-a-count", ("preregister", "cadp", "--looks", "1,x"), ("--looks 1,x", "'x' is not a seed count")
        ),
        Case(
            "looks-below-two",
            ("preregister", "cadp", "--looks", "0,2"),
            ("--looks 0,2", "increasing seed counts of at least 2"),
        ),
        Case(
            "results-check-missing-file",
            ("results", "--check", "--out", str(p["root"].parent / "missing.md")),
            ("missing.md: does not exist", "--check reads"),
        ),
        Case(
            "arm-config-outside-every-root",
            ("reproduce", "escaping", *root, "--no-report"),
            ("paper.yaml: field 'setup.arms.a.config'", "outside the paper's folder and every plugin root"),
        ),
        Case(
            "comm-all-reduce-given-a-list",
            (*run, *root, "--set", "method=listing", "--jobs", "1"),
            ("ctx.comm.all_reduce: expects one tensor, got a list", "ctx.comm.all_reduce_coalesced"),
            trains=True,
        ),
    ]


def case_ids() -> list[str]:
    """The rows' ids, known before any file is written (for ``pytest.mark.parametrize``)."""
    return [c.id for c in cases(defaultdict(lambda: Path("unwritten")))]
