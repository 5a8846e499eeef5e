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
