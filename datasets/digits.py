"""Handwritten digits (UCI "Optical Recognition of Handwritten Digits", as bundled by scikit-learn).

Why: convergence and generalization claims (QSR's, A²CiD²'s) need *real* images, and this
machine cannot download CIFAR-10. scikit-learn ships 1,797 8×8 grey-level digits (10 classes,
values 0..16) inside its wheel (``sklearn.datasets.load_digits``), so they are available offline
wherever the optional extra ``digits`` (scikit-learn) is installed. A reproduction that uses them
says so in its report through the dataset description.

The train/test split is fixed (stratified, from a generator derived from the dataset name only),
so every seed and every arm is evaluated on the same held-out digits; the run seed still drives
initialisation and data order. Pixels are scaled by 1/16 and normalised with the training mean and
std; ``upsample`` enlarges images by an integer factor (nearest) for models that down-sample more.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field
from torch.utils.data import TensorDataset

from distrepro import api

NAME: str = "digits"
DESCRIPTION: str = (
    "Real 8×8 handwritten digits bundled with scikit-learn (1,797 images, 10 classes; UCI optdigits "
    "test set); no download. Optional extra: pip install 'distrepro[digits]'."
)
NUM_CLASSES = 10


class Params(BaseModel):
    """Split and size of the digits task."""

    model_config = ConfigDict(extra="forbid")

    test_fraction: float = Field(0.25, gt=0.0, lt=1.0)
    #: integer factor for nearest-neighbour upsampling (1 keeps 8×8)
    upsample: int = Field(1, ge=1, le=8)


def _load() -> tuple[torch.Tensor, torch.Tensor]:
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:
        raise api.ConfigError(
            None, "dataset.name", "dataset 'digits' needs scikit-learn: pip install 'distrepro[digits]'"
        ) from exc
    raw = load_digits()
    images = torch.as_tensor(raw.images, dtype=torch.float32).unsqueeze(1) / 16.0
    return images, torch.as_tensor(raw.target, dtype=torch.int64)


def _stratified_split(labels: torch.Tensor, test_fraction: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices of train and test: the same fraction of every class held out, in a fixed random order."""
    gen = api.generator(NAME, 0, "split")
    train, test = [], []
    for cls in range(NUM_CLASSES):
        members = torch.nonzero(labels == cls).flatten()
        members = members[torch.randperm(len(members), generator=gen)]
        n_test = round(len(members) * test_fraction)
        test.append(members[:n_test])
        train.append(members[n_test:])
    train_idx, test_idx = torch.cat(train), torch.cat(test)
    return train_idx[torch.randperm(len(train_idx), generator=gen)], test_idx


def build(params: Params, root: Path | None, seed: int) -> api.DatasetBundle:
    """Load the bundled digits; ``root`` and ``seed`` are unused (the data and split are fixed)."""
    del root, seed
    images, labels = _load()
    if params.upsample > 1:
        images = F.interpolate(images, scale_factor=params.upsample, mode="nearest")
    train_idx, test_idx = _stratified_split(labels, params.test_fraction)
    x_train, y_train = images[train_idx], labels[train_idx]
    x_test, y_test = images[test_idx], labels[test_idx]
    mean, std = x_train.mean(), x_train.std().clamp_min(1e-6)
    x_train = ((x_train - mean) / std).contiguous()
    x_test = ((x_test - mean) / std).contiguous()
    side = images.shape[-1]
    return api.DatasetBundle(
        name=NAME,
        train=TensorDataset(x_train, y_train),
        test=TensorDataset(x_test, y_test),
        num_classes=NUM_CLASSES,
        input_shape=(1, side, side),
        train_tensors=(x_train, y_train),
        test_tensors=(x_test, y_test),
        description=f"{DESCRIPTION} [{len(y_train)}/{len(y_test)} train/test, 1×{side}²]",
    )
