"""The bundled handwritten-digits dataset: real images offline, a fixed stratified split, learnable."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from distrepro.config.run_config import validate_config
from distrepro.data.loading import build_dataset, load_dataset_plugin
from distrepro.engine.inprocess.run import InProcessEngine
from distrepro.job.resolve import build_job

pytest.importorskip("sklearn")

DIGITS = Path(__file__).resolve().parents[2] / "datasets" / "digits.py"


def _bundle(**params):
    return build_dataset(load_dataset_plugin(DIGITS), params, None, 0)


@pytest.mark.smoke
def test_shapes_split_and_normalisation() -> None:
    b = _bundle()
    x_train, y_train = b.train_tensors
    _, y_test = b.test_tensors
    assert b.input_shape == (1, 8, 8) and b.num_classes == 10
    assert len(y_train) + len(y_test) == 1797
    assert len(y_test) == pytest.approx(0.25 * 1797, abs=10)
    for cls in range(10):  # stratified: every class is held out in the same proportion
        share = (y_test == cls).sum() / ((y_test == cls).sum() + (y_train == cls).sum())
        assert float(share) == pytest.approx(0.25, abs=0.01)
    assert float(x_train.mean()) == pytest.approx(0.0, abs=1e-5)
    assert float(x_train.std()) == pytest.approx(1.0, abs=1e-4)


@pytest.mark.smoke
def test_split_is_fixed_and_disjoint() -> None:
    a, b = _bundle(), build_dataset(load_dataset_plugin(DIGITS), {}, None, 7)
    assert torch.equal(a.test_tensors[0], b.test_tensors[0])  # the run seed does not move the test set
    train = {tuple(x.flatten().tolist()) for x in a.train_tensors[0]}
    overlap = sum(tuple(x.flatten().tolist()) in train for x in a.test_tensors[0])
    assert overlap < 0.05 * len(a.test_tensors[0])  # optdigits has a few duplicate images, no shared indices


@pytest.mark.smoke
def test_upsample_enlarges_the_images() -> None:
    assert _bundle(upsample=2).input_shape == (1, 16, 16)


def test_small_cnn_learns_the_digits_in_a_short_run() -> None:
    cfg = validate_config(
        {
            "name": "digits-smoke",
            "method": "ar_sgd",
            "method_params": {"lr": 0.05, "momentum": 0.9},
            "profile": "homogeneous-4",
            "dataset": {"name": "digits"},
            "model": {"name": "small_cnn"},
            "batch_size": 16,
            "budget": {"epochs": 2},
            "eval": {"times": 1},
            "seeds": [0],
        }
    )
    result = InProcessEngine().run(build_job(cfg, 0))
    assert result.final.metrics["val_accuracy"] > 0.8
