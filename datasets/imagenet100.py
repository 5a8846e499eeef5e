"""ImageNet-100 from a local image folder (``<root>/train/<wnid>/*.JPEG``, ``<root>/val/<wnid>/*.JPEG``).

ImageNet-100 is the 100-class subset of ImageNet-1k introduced with Contrastive Multiview Coding
(Tian, Krishnan & Isola, "Contrastive Multiview Coding", arXiv:1906.05849, 2019); the class list
below is ``imagenet100.txt`` of the authors' repository (github.com/HobbitLong/CMC), in that
file's order. Labels are assigned in sorted-wnid order, as ``ImageFolder`` (and hence most papers'
code) does.

The suite does not build the subset for the user (that needs the ImageNet-1k licence); ``val/``
must already be sorted into class folders. Images are decoded with PIL (``torchvision.io`` is not
available with the CPU shim, ``distrepro/data/torchvision_shim.py``) and transformed with ``transforms.v2``:
evaluation and non-augmented training use resize to 256/224 of ``image_size`` + center crop; with
``augment: true`` training uses RandomResizedCrop + horizontal flip (torch's global RNG, seeded by
the harness). There is no in-memory fast path: 126k full-size images do not fit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from distrepro import api

NAME: str = "imagenet100"
#: split sizes of the CMC subset (its 100 classes of ILSVRC-2012: every training image of those classes, 50 val each);
#: what :func:`describe` reports, since a plan reads no folder (a run counts the folder it is given)
TRAIN_SIZE, VAL_SIZE = 126_689, 5_000
DESCRIPTION: str = (
    f"ImageNet-100 (CMC subset, Tian et al. 2019): 100 ImageNet-1k classes, {TRAIN_SIZE:,} train / {VAL_SIZE:,} val."
)

#: ImageNet statistics (torchvision's reference recipe)
MEAN, STD = api.IMAGENET_MEAN, api.IMAGENET_STD

#: the 100 WordNet ids of ImageNet-100, as in github.com/HobbitLong/CMC/blob/master/imagenet100.txt
IMAGENET100_CLASSES: tuple[str, ...] = (
    "n02869837",
    "n01749939",
    "n02488291",
    "n02107142",
    "n13037406",
    "n02091831",
    "n04517823",
    "n04589890",
    "n03062245",
    "n01773797",
    "n01735189",
    "n07831146",
    "n07753275",
    "n03085013",
    "n04485082",
    "n02105505",
    "n01983481",
    "n02788148",
    "n03530642",
    "n04435653",
    "n02086910",
    "n02859443",
    "n13040303",
    "n03594734",
    "n02085620",
    "n02099849",
    "n01558993",
    "n04493381",
    "n02109047",
    "n04111531",
    "n02877765",
    "n04429376",
    "n02009229",
    "n01978455",
    "n02106550",
    "n01820546",
    "n01692333",
    "n07714571",
    "n02974003",
    "n02114855",
    "n03785016",
    "n03764736",
    "n03775546",
    "n02087046",
    "n07836838",
    "n04099969",
    "n04592741",
    "n03891251",
    "n02701002",
    "n03379051",
    "n02259212",
    "n07715103",
    "n03947888",
    "n04026417",
    "n02326432",
    "n03637318",
    "n01980166",
    "n02113799",
    "n02086240",
    "n03903868",
    "n02483362",
    "n04127249",
    "n02089973",
    "n03017168",
    "n02093428",
    "n02804414",
    "n02396427",
    "n04418357",
    "n02172182",
    "n01729322",
    "n02113978",
    "n03787032",
    "n02089867",
    "n02119022",
    "n03777754",
    "n04238763",
    "n02231487",
    "n03032252",
    "n02138441",
    "n02104029",
    "n03837869",
    "n03494278",
    "n04136333",
    "n03794056",
    "n03492542",
    "n02018207",
    "n04067472",
    "n03930630",
    "n03584829",
    "n02123045",
    "n04229816",
    "n02100583",
    "n03642806",
    "n04336792",
    "n03259280",
    "n02116738",
    "n02108089",
    "n03424325",
    "n01855672",
    "n02090622",
)


class Params(BaseModel):
    """Options of the ImageNet-100 loader."""

    model_config = ConfigDict(extra="forbid")

    #: side of the square crop fed to the model
    image_size: int = Field(224, ge=8)
    #: RandomResizedCrop + horizontal flip on the training split
    augment: bool = False
    #: require exactly the 100 standard class folders; when false, use whatever class folders exist
    strict_classes: bool = True


def _class_folders(folder: Path) -> list[str]:
    return sorted(entry.name for entry in folder.iterdir() if entry.is_dir())


def _image_folder(folder: Path, classes: list[str], transform: Any) -> Any:
    """A plain (hence picklable) ``ImageFolder`` over ``folder``.

    ``ImageFolder`` labels the sorted class folders 0..K-1; :func:`build` has already checked
    that the folders are exactly ``classes`` in both splits, so train and val agree on labels.
    """
    # api.load_image: a file that is not an image is "not an image: PATH", not PIL's error mid-run
    dataset = api.load_torchvision().datasets.ImageFolder(str(folder), transform=transform, loader=api.load_image)
    if list(dataset.classes) != classes:  # e.g. a folder created between the check and now
        raise api.ConfigError(folder, "dataset.root", f"class folders changed while loading '{folder}'")
    return dataset


def _check_classes(root: Path, split: str, found: list[str], expected: list[str]) -> None:
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing (e.g. {', '.join(missing[:3])})")
        if extra:
            parts.append(f"{len(extra)} unexpected (e.g. {', '.join(extra[:3])})")
        raise api.ConfigError(
            root,
            "dataset.root",
            f"class folders of '{root / split}' do not match the expected {len(expected)} classes: "
            f"{'; '.join(parts)}. ImageNet-100 needs exactly the CMC class list "
            "(or set strict_classes: false in dataset.params to use the folders as they are)",
        )


def describe(params: Params) -> api.DatasetShape:
    """ImageNet-100 without the folder (``distrepro plan``): 100 classes at ``image_size``; split sizes nominal."""
    side = params.image_size
    note = "split sizes nominal (the CMC subset's, Tian et al. 2019); the folder decides"
    return api.DatasetShape(len(IMAGENET100_CLASSES), (3, side, side), TRAIN_SIZE, VAL_SIZE, note)


def build(params: Params, root: Path | None, seed: int) -> api.DatasetBundle:
    """Index ``root/train`` and ``root/val``; ``seed`` is unused (the data is fixed)."""
    del seed
    layout = "'train/<wnid>/*.JPEG' and 'val/<wnid>/*.JPEG'"
    if root is None:
        raise api.ConfigError(None, "dataset.root", f"imagenet100 needs dataset.root: a folder with {layout}")
    for split in ("train", "val"):
        if not (root / split).is_dir():
            raise api.ConfigError(root, "dataset.root", f"no '{split}/' folder in '{root}'; expected {layout}")
    found = _class_folders(root / "train")
    if params.strict_classes:
        classes = sorted(IMAGENET100_CLASSES)
        _check_classes(root, "train", found, classes)
    else:
        if not found:
            raise api.ConfigError(root, "dataset.root", f"no class folders in '{root / 'train'}'; expected {layout}")
        classes = found
    _check_classes(root, "val", _class_folders(root / "val"), classes)

    try:
        train = _image_folder(root / "train", classes, api.imagenet_transform(params.image_size, params.augment))
        test = _image_folder(root / "val", classes, api.imagenet_transform(params.image_size, False))
    except FileNotFoundError as exc:  # a class folder without a single image
        raise api.ConfigError(root, "dataset.root", str(exc)) from exc
    return api.DatasetBundle(
        name=NAME,
        train=train,
        test=test,
        num_classes=len(classes),
        input_shape=(3, params.image_size, params.image_size),
        description=(
            f"{DESCRIPTION} [{len(classes)} classes, {len(train)}/{len(test)} images, "
            f"{params.image_size} px, augment={params.augment}]"
        ),
    )
