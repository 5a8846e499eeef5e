"""MNIST-1D (Greydanus & Kobak, "Scaling down deep learning with MNIST-1D", ICML 2024): the mid scale's data.

Why: the proxies' 8×8 digits saturate near 98 % test accuracy, so the accuracy effects the papers
claim (about one point) have no room to show. MNIST-1D is generated, not downloaded: the ``mnist1d``
package ships ten 12-point templates and ``make_dataset`` pads, shifts, scales, shears and adds
correlated and i.i.d. noise to them (its README: a CNN reaches about 94 % test accuracy and an MLP
about 68 %, so the task is far from saturated and architectures and training rules can be told apart).
Only the generator is used here (never the package's download path), so it works offline; the
generator's own seed is fixed (42, the package default), so every run and arm sees the same data,
and the run seed drives only initialisation and data order.

Options: ``num_samples`` (the default 10,000 with ``train_split`` 0.5 gives a test set of 5,000:
a 0.5-point difference is 25 test signals) and ``label_noise``, a fixed fraction of training
labels replaced by another class (drawn from a generator derived from the dataset name), which
keeps the training loss above interpolation the way the papers' label smoothing does on ImageNet.
Signals are 40 points, given as ``(1, 1, 40)`` tensors (channel, height 1, width), for ``cnn1d``.
"""

from __future__ import annotations

import functools
import random
from pathlib import Path

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field
from torch.utils.data import TensorDataset

from distrepro import api

NAME: str = "mnist1d"
DESCRIPTION: str = (
    "MNIST-1D (Greydanus & Kobak 2024): 40-point 1D signals of 10 digit templates, generated offline by the "
    "mnist1d package (no download). Optional extra: pip install 'distrepro[mnist1d]'."
)
NUM_CLASSES = 10
LENGTH = 40  # the package's final_seq_length


class Params(BaseModel):
    """Size, split and label noise of the generated task (generator settings otherwise the package's)."""

    model_config = ConfigDict(extra="forbid")

    num_samples: int = Field(10_000, ge=100, le=200_000)
    train_split: float = Field(0.5, gt=0.0, lt=1.0)
    #: fraction of training labels replaced by another class (fixed, the same for every run)
    label_noise: float = Field(0.0, ge=0.0, lt=1.0)


@functools.lru_cache(maxsize=4)
def _generate(num_samples: int, train_split: float) -> tuple[np.ndarray, ...]:
    """The package's generator with its default settings; the global RNGs it seeds are restored after."""
    try:
        from mnist1d.data import get_dataset_args, make_dataset
    except ImportError as exc:
        raise api.ConfigError(
            None, "dataset.name", "dataset 'mnist1d' needs the mnist1d package: pip install 'distrepro[mnist1d]'"
        ) from exc
    args = get_dataset_args()
    args.num_samples, args.train_split = num_samples, train_split
    np_state, py_state = np.random.get_state(), random.getstate()
    try:
        data = make_dataset(args)
    finally:
        np.random.set_state(np_state)
        random.setstate(py_state)
    return data["x"], data["y"], data["x_test"], data["y_test"]


def _noisy(labels: torch.Tensor, fraction: float) -> torch.Tensor:
    """``labels`` with a fixed ``fraction`` replaced by a different class, uniformly."""
    if fraction == 0:
        return labels
    gen = api.generator(NAME, 0, "label_noise")
    flip = torch.rand(len(labels), generator=gen) < fraction
    shift = torch.randint(1, NUM_CLASSES, (len(labels),), generator=gen)
    return torch.where(flip, (labels + shift) % NUM_CLASSES, labels)


def describe(params: Params) -> api.DatasetShape:
    train = int(params.num_samples // NUM_CLASSES * NUM_CLASSES * params.train_split)
    return api.DatasetShape(NUM_CLASSES, (1, 1, LENGTH), train, params.num_samples // NUM_CLASSES * NUM_CLASSES - train)


def build(params: Params, root: Path | None, seed: int) -> api.DatasetBundle:
    """Generate the signals; ``root`` and ``seed`` are unused (the data and split are fixed)."""
    del root, seed
    x, y, xt, yt = _generate(params.num_samples, params.train_split)
    x_train = torch.as_tensor(x, dtype=torch.float32).reshape(-1, 1, 1, LENGTH).contiguous()
    x_test = torch.as_tensor(xt, dtype=torch.float32).reshape(-1, 1, 1, LENGTH).contiguous()
    y_train = _noisy(torch.as_tensor(y, dtype=torch.int64), params.label_noise)
    y_test = torch.as_tensor(yt, dtype=torch.int64)
    noise = f", {params.label_noise:.0%} training labels noisy" if params.label_noise else ""
    return api.DatasetBundle(
        name=NAME,
        train=TensorDataset(x_train, y_train),
        test=TensorDataset(x_test, y_test),
        num_classes=NUM_CLASSES,
        input_shape=(1, 1, LENGTH),
        train_tensors=(x_train, y_train),
        test_tensors=(x_test, y_test),
        description=f"{DESCRIPTION} [{len(y_train)}/{len(y_test)} train/test{noise}]",
    )
