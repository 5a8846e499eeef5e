"""Tiny ImageNet-style folders (``train/<wnid>/*.JPEG``, ``val/<wnid>/*.JPEG``) for loader and scale tests."""

from __future__ import annotations

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
