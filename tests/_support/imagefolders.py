"""Tiny ImageNet-style folders (``train/<wnid>/*.JPEG``, ``val/<wnid>/*.JPEG``) for loader and scale tests."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
from PIL import Image


def write_image_folder(root: Path, classes: list[str], per_class: int, size: tuple[int, int] = (24, 20)) -> None:
    rng = np.random.default_rng(1)
    for split in ("train", "val"):
        for name in classes:
            folder = root / split / name
            folder.mkdir(parents=True)
            for i in range(per_class):
                pixels = rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f"{name}_{i}.JPEG", format="JPEG")


def write_fake_cifar(root: Path, per_batch: int = 4, n_test: int = 4) -> np.ndarray:
    """A tiny ``cifar-10-batches-py`` in the real format: 5 train batches + test batch + meta."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    train_rows = []
    for b in range(1, 6):
        data = rng.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8)
        labels = [(b * per_batch + i) % 10 for i in range(per_batch)]
        entry = {"batch_label": f"training batch {b} of 5", "labels": labels, "data": data, "filenames": []}
        (folder / f"data_batch_{b}").write_bytes(pickle.dumps(entry, protocol=2))
        train_rows.append(data)
    test = {
        "batch_label": "testing batch 1 of 1",
        "labels": list(range(n_test)),
        "filenames": [],
        "data": rng.integers(0, 256, size=(n_test, 3072), dtype=np.uint8),
    }
    (folder / "test_batch").write_bytes(pickle.dumps(test, protocol=2))
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    meta = {"label_names": names, "num_cases_per_batch": per_batch, "num_vis": 3072}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    return np.vstack(train_rows)
