"""ImageNet-1k from a local image folder (``<root>/train/<wnid>/*.JPEG``, ``<root>/val/<wnid>/*.JPEG``).

Why: the QSR paper's recipes (ResNet-152, ViT-B/16) train on the full ILSVRC-2012 set (1,281,167 training
and 50,000 validation images, 1,000 classes). The suite never downloads it (licence); ``val/`` must
already be sorted into class folders (the usual ``valprep.sh`` layout). Labels follow sorted wnids, as
``ImageFolder`` does. Training uses RandomResizedCrop + horizontal flip with ``augment: true``; evaluation
resizes to 256/224 of ``image_size`` and center-crops, the reference code's crop ratio. ``distrepro plan``
needs no folder: :func:`describe` gives the split sizes of ILSVRC-2012.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from distrepro import api

NAME: str = "imagenet"
NUM_CLASSES = 1000
#: split sizes of ILSVRC-2012, what :func:`describe` reports (a plan reads no folder)
TRAIN_SIZE, VAL_SIZE = 1_281_167, 50_000
DESCRIPTION: str = (
    f"ImageNet-1k (ILSVRC-2012): {NUM_CLASSES:,} classes, {TRAIN_SIZE:,} train / {VAL_SIZE:,} val images "
    "(local folder)."
)
MEAN, STD = api.IMAGENET_MEAN, api.IMAGENET_STD


class Params(BaseModel):
    """Options of the ImageNet-1k loader."""

    model_config = ConfigDict(extra="forbid")

    image_size: int = Field(224, ge=8)
    augment: bool = False


def describe(params: Params) -> api.DatasetShape:
    """ILSVRC-2012 without the folder: 1,000 classes at ``image_size``, the official split sizes."""
    side = params.image_size
    return api.DatasetShape(NUM_CLASSES, (3, side, side), TRAIN_SIZE, VAL_SIZE, "split sizes of ILSVRC-2012")


def build(params: Params, root: Path | None, seed: int) -> api.DatasetBundle:
    """Index ``root/train`` and ``root/val``; ``seed`` is unused (the data is fixed)."""
    del seed
    layout = "'train/<wnid>/*.JPEG' and 'val/<wnid>/*.JPEG'"
    if root is None:
        raise api.ConfigError(None, "dataset.root", f"imagenet needs dataset.root: a folder with {layout}")
    folders = {}
    for split in ("train", "val"):
        if not (root / split).is_dir():
            raise api.ConfigError(root, "dataset.root", f"no '{split}/' folder in '{root}'; expected {layout}")
        folders[split] = sorted(e.name for e in (root / split).iterdir() if e.is_dir())
    if folders["train"] != folders["val"] or len(folders["train"]) != NUM_CLASSES:
        raise api.ConfigError(
            root,
            "dataset.root",
            f"'{root}' needs the same {NUM_CLASSES} class folders in train/ and val/; found "
            f"{len(folders['train'])} and {len(folders['val'])}",
        )
    tv = api.load_torchvision()
    try:
        # api.load_image: a file that is not an image is "not an image: PATH", not PIL's error mid-run
        train = tv.datasets.ImageFolder(
            str(root / "train"),
            transform=api.imagenet_transform(params.image_size, params.augment),
            loader=api.load_image,
        )
        test = tv.datasets.ImageFolder(
            str(root / "val"), transform=api.imagenet_transform(params.image_size, False), loader=api.load_image
        )
    except FileNotFoundError as exc:  # a class folder without a single image
        raise api.ConfigError(root, "dataset.root", str(exc)) from exc
    return api.DatasetBundle(
        name=NAME,
        train=train,
        test=test,
        num_classes=NUM_CLASSES,
        input_shape=(3, params.image_size, params.image_size),
        description=f"{DESCRIPTION} [{len(train)}/{len(test)} images, {params.image_size} px, "
        f"augment={params.augment}]",
    )
