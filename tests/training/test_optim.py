"""Optimiser helpers shared by method plugins (distrepro/api/tensors.py)."""

from __future__ import annotations

import pytest


@pytest.mark.smoke
def test_ar_sgd_follows_the_harness_step_schedule():
    """schedule: lr x0 from epoch 1 on: a 2-epoch run ends where the 1-epoch run did (SGD moves by lr·buf)."""
    import torch

    from distrepro.config.run_config import validate_config
    from distrepro.engine.inprocess.run import InProcessEngine
    from distrepro.job.resolve import build_job

    def final_params(epochs: int, **schedule) -> torch.Tensor:
        cfg = validate_config(
            {
                "method": "ar_sgd",
                "method_params": {"lr": 0.05},
                **schedule,
                "profile": "homogeneous-4",
                "dataset": {"params": {"train_size": 128, "test_size": 32, "image_size": 8}},
                "batch_size": 8,
                "budget": {"epochs": epochs},
                "eval": {"times": 1},
                "torch_threads": 1,
            }
        )
        model = InProcessEngine().run(build_job(cfg, 0)).models[0]
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    frozen = {"schedule": {"kind": "step", "milestones": [1], "milestones_in": "epochs", "factor": 1e-30}}
    assert torch.allclose(final_params(1, **frozen), final_params(2, **frozen), atol=1e-12)
    assert not torch.allclose(final_params(1), final_params(2), atol=1e-4)  # without decay it keeps moving
