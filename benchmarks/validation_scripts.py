"""What a validation point's source ran besides the model: its DDP, its buckets, its batches, its loop.

Why a module of its own: each is read from the source's blocks in ``benchmarks/data/emulator_points.yaml``, counted
from the source's own training script (which DDP it wrapped the model in, where that DDP cuts its buckets, how its
ranks' batches differ, what its loop does per micro-batch outside DDP, whether it all-reduces while accumulating);
``benchmarks/validation_model.py`` prices them. A block missing a field is an error naming its source.
"""

from __future__ import annotations

import math
from typing import Any

from distrepro.timing import batch_spread as bs
from distrepro.timing import ddp_buckets as db
from distrepro.timing import framework as fw


def synced_share(data: dict[str, Any], point: dict[str, Any]) -> float:
    """Share of the point's micro-batches whose backward all-reduces the gradients: ``1/k`` when its source's DDP
    skips the all-reduce while accumulating (``no_sync: true``: PyTorch DDP's ``no_sync()`` on all but an update's
    last micro-batch) and the point accumulates ``k`` micro-batches an update, else 1 (every backward all-reduces,
    as apex DDP does unless told otherwise)."""
    accumulation = point.get("accumulation")
    if not data["sources"][point["source"]].get("no_sync") or accumulation is None:
        return 1.0
    return 1.0 / int(accumulation["point"])


def unsynced_micro_batches(point: dict[str, Any]) -> int:
    """Micro-batches a rank of the point computes between two waits for the other ranks (its ``micro_batches:``,
    1 when absent): more than one only where the point's step is a whole accumulated update and its source's loop
    neither all-reduces nor syncs the ranks until the update's last micro-batch (DeepLearningExamples' BERT
    pretraining: ``no_sync()`` under ``--allreduce_post_accumulation``, its script's default). A point whose step is
    one micro-batch (QuartzNet, GNMT) keeps 1 whatever it accumulates: it syncs every micro-batch."""
    count = point.get("micro_batches", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"point {point['id']}: micro_batches must be a whole number of at least 1, got {count!r}")
    return count


def batch_spread_of(data: dict[str, Any], point: dict[str, Any]) -> bs.LengthBucketing | None:
    """How the point's source batches its sentences by length (its ``batch_spread:``, at the point's tokens per
    GPU as ``--max-tokens``), None for a source whose ranks' batches are alike (fixed shapes)."""
    block = data["sources"][point["source"]].get("batch_spread")
    if block is None:
        return None
    fields = [f for f in bs.LengthBucketing.__dataclass_fields__ if f not in ("max_tokens", "max_length", "source")]
    missing = [f for f in (*fields, "source") if f not in block]
    if missing:
        raise ValueError(f"source {point['source']}: batch_spread lacks {', '.join(missing)}")
    figures = {name: float(block[name]) for name in fields if name != "batch_multiple"}
    return bs.LengthBucketing(
        max_tokens=int(point["tokens_per_gpu"]),
        batch_multiple=int(block["batch_multiple"]),
        max_length=int(block.get("max_length", 250)),
        source=str(block["source"]),
        **figures,
    )


def loop_extras_of(data: dict[str, Any], point: dict[str, Any]) -> fw.LoopExtras | None:
    """What the point's source's training loop does per step on more than one GPU outside DDP (its ``per_step:``,
    counted from its code), None when nobody has counted it."""
    block = data["sources"][point["source"]].get("per_step")
    if block is None:
        return None
    fields = ("syncs_fixed", "syncs_per_rank", "exposed_ops_per_tensor", "all_gather_bytes")
    missing = [f for f in (*fields, "source") if f not in block]
    if missing:
        raise ValueError(f"source {point['source']}: per_step lacks {', '.join(missing)}")
    syncs_fixed, syncs_per_rank, exposed, gather = (float(block[f]) for f in fields)
    return fw.LoopExtras(syncs_fixed, syncs_per_rank, exposed, gather, str(block["source"]))


def reducer_of(data: dict[str, Any], point: dict[str, Any]) -> fw.Reducer:
    """The DDP implementation the point's source ran (its own ``ddp:``, else its source's), as its code names it."""
    name = point.get("ddp") or data["sources"][point["source"]].get("ddp", "torch")
    if name not in fw.REDUCERS:
        raise ValueError(f"point {point['id']}: ddp {name!r} is none of {sorted(fw.REDUCERS)}")
    return fw.REDUCERS[name]


def bucketing_of(data: dict[str, Any], point: dict[str, Any], grad_bytes: float) -> tuple[str, db.Bucketing]:
    """Where the point's DDP cut its buckets, as its script set them: the point's ``bucketing:``, else its source's
    (when the point runs the source's DDP), else the default of the DDP it ran (``torch-default``,
    ``apex-default``), each a named entry of the data's ``bucketings:``."""
    source = data["sources"][point["source"]]
    ddp = reducer_of(data, point).name
    name = point.get("bucketing")
    if name is None and ddp == source.get("ddp", "torch"):
        name = source.get("bucketing")
    name = name or f"{ddp}-default"
    block = data.get("bucketings", {}).get(name)
    if block is None:
        raise ValueError(f"point {point['id']}: bucketing {name!r} is not among the data's bucketings")
    text = str(block["source"])
    if block.get("one_bucket"):
        return name, db.Bucketing(math.inf, math.inf, text)
    if "elements" in block:
        params = data["models"][point["model"]].get("params")
        if params is None:
            raise ValueError(
                f"point {point['id']}: bucketing {name!r} counts elements; model {point['model']} has no params"
            )
        return name, db.Bucketing.of_elements(float(block["elements"]), db.bytes_per_element(grad_bytes, params), text)
    mib = 1024.0 * 1024.0
    return name, db.Bucketing(float(block["cap_mib"]) * mib, float(block["first_cap_mib"]) * mib, text)


def loop_all_reduce_bytes(data: dict[str, Any], point: dict[str, Any]) -> float:
    """Bytes of the small all-reduce the point's source's loop waits for every micro-batch on more than one GPU (its
    ``per_step: all_reduce_bytes``, e.g. a loss averaged over the ranks and read back), 0 when it has none."""
    block = data["sources"][point["source"]].get("per_step") or {}
    return float(block.get("all_reduce_bytes", 0.0))
