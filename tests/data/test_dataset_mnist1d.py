"""datasets/mnist1d.py: MNIST-1D generated offline, fixed whatever the run seed, label noise as asked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from distrepro.data.loading import DatasetBundle, build_dataset, load_dataset_plugin

pytest.importorskip("mnist1d")
ROOT = Path(__file__).resolve().parents[2]


def _mnist1d(seed: int = 0, **params: float) -> DatasetBundle:
    return build_dataset(
        load_dataset_plugin(ROOT / "datasets" / "mnist1d.py"), {"num_samples": 1000, **params}, None, seed
    )


def test_mnist1d_is_fixed_noisy_as_asked_and_leaves_global_rngs_alone() -> None:
    state = np.random.get_state()[1].copy()
    noisy = _mnist1d(label_noise=0.2)
    assert np.array_equal(np.random.get_state()[1], state)  # the package's set_seed is undone
    assert noisy.train_tensors is not None and noisy.test_tensors is not None
    x, y = noisy.train_tensors
    assert x.shape == (500, 1, 1, 40) and noisy.test_tensors[0].shape == (500, 1, 1, 40)
    again = _mnist1d(seed=7, label_noise=0.2)  # the run seed does not change the data
    assert again.train_tensors is not None and torch.equal(x, again.train_tensors[0])
    assert torch.equal(y, again.train_tensors[1])
    clean = _mnist1d()
    assert clean.train_tensors is not None and clean.test_tensors is not None
    assert 0.12 < (clean.train_tensors[1] != y).float().mean().item() < 0.28  # 20 % of training labels replaced
    assert torch.equal(clean.test_tensors[1], noisy.test_tensors[1])  # test labels are never noisy
