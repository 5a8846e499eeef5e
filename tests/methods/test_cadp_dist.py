"""reduce_scatter / all_gather on the torch.distributed engine: same result and clock as in-process."""

from __future__ import annotations

import pytest
import torch

from distrepro.config.run_config import validate_config
from distrepro.engine.inprocess.run import InProcessEngine
from distrepro.engine.multiprocess.launch import DistEngine
from distrepro.job.resolve import build_job


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


@pytest.mark.distributed
def test_deepspeed_zero_same_parameters_and_clock_as_inprocess() -> None:
    cfg = validate_config(
        {
            "method": "deepspeed_zero",
            "method_params": {"weight_decay": 1e-3},
            "profile": "hetero-2fast-2slow",
            "dataset": {"params": {"train_size": 256, "test_size": 128, "image_size": 8}},
            "batch_size": [8, 16, 8, 4],
            "budget": {"steps": 3},
            "eval": {"times": 1},
            "dist": {"timeout_s": 30},
        }
    )
    a = InProcessEngine().run(build_job(cfg, 0))
    b = DistEngine().run_cell(build_job(cfg.model_copy(update={"engine": "dist"}), 0), None)
    assert torch.allclose(_flat(a.models[0]), _flat(b.models[0]), atol=1e-6)
    assert all(torch.equal(_flat(b.models[0]), _flat(m)) for m in b.models[1:])
    assert b.final.emulated_s == pytest.approx(a.final.emulated_s, rel=1e-9)
    assert [w.bytes_sent for w in b.final.workers] == [w.bytes_sent for w in a.final.workers]
