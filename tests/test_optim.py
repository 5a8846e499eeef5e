"""Optimiser helpers shared by method plugins (suite/optim.py)."""

from __future__ import annotations

import pytest


@pytest.mark.smoke
def test_step_decay_halves_at_exact_epoch_boundaries():
    from suite.optim import step_decay

    assert step_decay(0.01, 9.99, 10, 0.5) == 0.01
    assert step_decay(0.01, 10.0, 10, 0.5) == 0.005  # the boundary itself already decays
    assert step_decay(0.01, 25.0, 10, 0.5) == 0.0025
    assert step_decay(0.01, 25.0, None, 0.5) == 0.01


@pytest.mark.smoke
def test_ar_sgd_applies_its_step_decay():
    """lr x0 from epoch 1 on: a 2-epoch run ends where the 1-epoch run did (SGD moves by lr·buf)."""
    import torch

    from suite.config import validate_config
    from suite.engine.inprocess import InProcessEngine
    from suite.job import build_job

    def final_params(epochs: int, **decay) -> torch.Tensor:
        cfg = validate_config(
            {
                "method": "ar_sgd",
                "method_params": {"lr": 0.05, **decay},
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

    frozen = {"lr_decay_every_epochs": 1.0, "lr_decay_factor": 1e-30}
    assert torch.allclose(final_params(1, **frozen), final_params(2, **frozen), atol=1e-12)
    assert not torch.allclose(final_params(1), final_params(2), atol=1e-4)  # without decay it keeps moving
