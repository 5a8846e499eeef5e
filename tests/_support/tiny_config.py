"""The smallest run config the in-process tests build jobs and run campaigns from: synthetic 8×8 images, one step,
one evaluation, one torch thread. One definition, so the tests that need no more do not drift apart."""

from __future__ import annotations

from typing import Any

TINY: dict[str, Any] = {
    "method": "ar_sgd",
    "dataset": {"name": "synthetic", "params": {"train_size": 64, "test_size": 16, "image_size": 8}},
    "batch_size": 8,
    "budget": {"steps": 1},
    "eval": {"times": 1},
    "torch_threads": 1,
}
