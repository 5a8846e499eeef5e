"""The distributed engine launches and charges the emulated model's gradient buckets as the in-process engine does
(issue 44): the hand-computed case of tests/_support/bucket_case.py on two gloo processes (file rendezvous in
``tmp_path``), against its figures and against the in-process run of the same case."""

from __future__ import annotations

import json
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import bucket_case as case
import pytest
import zygote_ranks
from lanenet import Net

pytestmark = pytest.mark.distributed  # two processes: in the default session, not slow

TIMEOUT_S = 60.0


def _flat(rows: Any) -> list[float]:
    return [x for row in rows for x in row]


def _worker(rank: int, rendezvous: str, folder: str) -> None:
    import torch.distributed as dist

    from distrepro.engine.clock import VirtualClock
    from distrepro.engine.multiprocess.comm import DistComm
    from distrepro.hardware.profiles import load_profile
    from distrepro.timing.timemodel import CommCostModel

    path = Path(folder)
    try:
        dist.init_process_group(
            "gloo", init_method=rendezvous, rank=rank, world_size=2, timeout=timedelta(seconds=TIMEOUT_S)
        )
        clock = VirtualClock(rank)
        cost = CommCostModel(load_profile(path / "buckets.yaml"))
        out = case.scenario(rank, DistComm(rank, 2, clock, cost, bytes_scale=case.SCALE), clock)
        dist.destroy_process_group()
    except BaseException:
        (path / f"rank{rank}.error.txt").write_text(traceback.format_exc())
        raise
    (path / f"rank{rank}.json").write_text(json.dumps(out))


def _dist_run(folder: Path) -> dict[int, dict[str, Any]]:
    (folder / "buckets.yaml").write_text(case.PROFILE, encoding="utf-8")
    try:  # the two ranks forked from the zygote, not spawned afresh (zygote_ranks says why)
        zygote_ranks.spawn(_worker, (f"file://{folder / 'rendezvous'}", str(folder)), nprocs=2)
    except Exception as exc:
        errors = "\n".join(p.read_text() for p in sorted(folder.glob("rank*.error.txt")))
        raise AssertionError(f"a rank failed:\n{errors}") from exc
    return {r: json.loads((folder / f"rank{r}.json").read_text()) for r in range(2)}


def test_the_dist_engine_charges_each_emulated_bucket_as_the_in_process_engine(tmp_path: Path) -> None:
    dist_out = _dist_run(tmp_path)
    local = Net(tmp_path, 2, bytes_scale=case.SCALE).run(case.scenario)
    for rank in (0, 1):
        got = dist_out[rank]
        assert got["held"] == case.HELD  # the 1.2 MB bucket is launched although it holds no proxy tensor
        assert _flat(got["works"]) == pytest.approx(_flat(case.WORKS), rel=1e-12)
        assert _flat(got["works"]) == pytest.approx(_flat(local[rank]["works"]), rel=1e-12)
        assert got["t"] == pytest.approx(local[rank]["t"], rel=1e-12)
        assert got["bytes"] == local[rank]["bytes"]
        assert got["grads"] == local[rank]["grads"]  # the proxy's gradients, averaged alike
