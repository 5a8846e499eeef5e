"""CIFAR-10 from a local folder in torchvision's format (``<root>/cifar-10-batches-py/``).

The suite never downloads on its own (runs must work offline and be reproducible from a known
copy); ``download: true`` lets torchvision fetch the archive for users who have internet.

Without augmentation, both splits are decoded once into normalised float32 tensors (600 MB for
the training set) and served through the tensor fast path: gathering a batch is one indexing
operation instead of 32 PIL round trips. With ``augment: true`` every training item goes through
torchvision's ``transforms.v2`` pipeline (random crop with 4 px padding + horizontal flip, the
standard CIFAR recipe), restated on uint8 tensors (:class:`AugmentedSplit`: the pipeline's values bit
for bit, without a PIL image per item); its draws come from torch's global RNG, which the harness seeds.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict
from torch.utils.data import Dataset, TensorDataset

from distrepro import api

NAME: str = "cifar10"
DESCRIPTION: str = "CIFAR-10 (Krizhevsky 2009): 50,000 train / 10,000 test 32×32 colour images, 10 classes."

BASE_FOLDER = "cifar-10-batches-py"
#: per-channel statistics of the CIFAR-10 training set (the values used by kuangliu/pytorch-cifar)
MEAN: tuple[float, float, float] = (0.4914, 0.4822, 0.4465)
STD: tuple[float, float, float] = (0.2470, 0.2435, 0.2616)
#: zero padding of the random crop (the standard CIFAR recipe: 4 px, then a 32 px crop)
PAD = 4


class Params(BaseModel):
    """Options of the CIFAR-10 loader."""

    model_config = ConfigDict(extra="forbid")

    #: let torchvision download the archive into ``root`` if it is not there (needs internet)
    download: bool = False
    #: random crop (4 px zero padding) + horizontal flip on the training split
    augment: bool = False
    #: check the files' MD5 sums against torchvision's list (turn off for re-packed or test copies)
    verify_checksums: bool = True


def _dataset_class(verify_checksums: bool) -> type[Any]:
    """torchvision's ``CIFAR10``, or a subclass that only checks that the files exist."""
    cifar10: type[Any] = api.load_torchvision().datasets.CIFAR10
    if verify_checksums:
        return cifar10

    class _UncheckedCIFAR10(cifar10):  # type: ignore[misc,valid-type]
        train_list: ClassVar[list[list[str | None]]] = [[name, None] for name, _ in cifar10.train_list]
        test_list: ClassVar[list[list[str | None]]] = [[name, None] for name, _ in cifar10.test_list]
        meta: ClassVar[dict[str, str | None]] = {**cifar10.meta, "md5": None}

    return _UncheckedCIFAR10


def _file_problem(path: Path, meta: bool) -> str | None:
    """What is wrong with one file of the folder for torchvision's loader, or None.

    Needed because with ``verify_checksums: false`` nothing vouches for the files: a truncated or
    foreign file fails deep in ``pickle`` or numpy with no file name. Unpickling is what torchvision
    itself does with these files (so, as there, only load copies you trust).
    """
    if not path.is_file():
        return "missing"
    try:
        with path.open("rb") as f:
            entry = pickle.load(f, encoding="latin1")
    except Exception as exc:
        return f"not a pickled CIFAR-10 file ({type(exc).__name__}: {exc})"
    if meta:
        names = entry.get("label_names") if isinstance(entry, dict) else None
        if not (isinstance(names, list) and len(names) == 10):
            return "expected a dict with 'label_names', a list of the 10 class names"
        return None
    labels = entry.get("labels", entry.get("fine_labels")) if isinstance(entry, dict) else None
    if not isinstance(entry, dict) or "data" not in entry or labels is None:
        return f"expected a dict with 'data' and 'labels', got {type(entry).__name__}"
    data = entry["data"]
    if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 2 and data.shape[1] == 3072):
        shape = getattr(data, "shape", None)
        got = f"{data.dtype} array of shape {shape}" if isinstance(data, np.ndarray) else type(data).__name__
        return f"'data' must be a uint8 array of rows of 3072 values (3x32x32), got {got}"
    if not isinstance(labels, list | tuple | np.ndarray) or len(labels) != data.shape[0]:
        return f"'labels' must hold one class per image ({data.shape[0]} images)"
    bad = [y for y in labels if not (isinstance(y, int | np.integer) and 0 <= y < 10)]
    if bad:
        return f"'labels' must be integers 0-9, found {bad[0]!r}"
    return None


def _diagnose(folder: Path, cls: type[Any]) -> str | None:
    """The first file of ``folder`` that cannot be a CIFAR-10 file, and why (None if all look right)."""
    names = [name for name, _ in (*cls.train_list, *cls.test_list)]
    for name, meta in [*((n, False) for n in names), (cls.meta["filename"], True)]:
        problem = _file_problem(folder / name, meta)
        if problem is not None:
            return f"'{folder / name}': {' '.join(problem.split())}"
    return None


def _looks_like_cifar(data: Any, targets: Any) -> bool:
    """uint8 images and one integer label 0-9 per image: what :func:`_to_tensors` and the loss need."""
    try:
        labels = np.asarray(targets)
    except Exception:
        return False
    return (
        isinstance(data, np.ndarray)
        and data.dtype == np.uint8
        and labels.ndim == 1
        and len(labels) == len(data)
        and np.issubdtype(labels.dtype, np.integer)
        and (labels.size == 0 or (int(labels.min()) >= 0 and int(labels.max()) < 10))
    )


def _load_split(cls: type[Any], root: Path, train: bool, download: bool) -> Any:
    """torchvision's dataset for one split; garbage files are a ConfigError naming the file."""
    folder = root / BASE_FOLDER
    try:
        raw = cls(str(root), train=train, download=download)
    except (RuntimeError, OSError):
        raise  # missing files or a checksum mismatch: torchvision's own message, reported by build
    except Exception as exc:  # unpickling garbage raises anything (UnpicklingError, KeyError, ValueError, ...)
        problem = _diagnose(folder, cls) or f"{type(exc).__name__}: {exc}"
        raise api.ConfigError(root, "dataset.root", f"cannot load CIFAR-10: {problem}") from None
    if not _looks_like_cifar(raw.data, raw.targets):
        problem = _diagnose(folder, cls) or "images or labels are not CIFAR-10's (uint8 images, labels 0-9)"
        raise api.ConfigError(root, "dataset.root", f"cannot load CIFAR-10: {problem}")
    return raw


def _to_tensors(data: Any, targets: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, 32, 32, 3) uint8 → normalised (N, 3, 32, 32) float32; exactly what ToTensor+Normalize give."""
    # in place after one uint8 copy: peak memory ~1× the float tensor (600 MB for the train split)
    x = torch.from_numpy(data).permute(0, 3, 1, 2).contiguous().float().div_(255.0)
    x.sub_(torch.tensor(MEAN).view(1, 3, 1, 1)).div_(torch.tensor(STD).view(1, 3, 1, 1))
    return x, torch.as_tensor(targets, dtype=torch.int64)


def _augment_transform() -> Any:
    """torchvision's pipeline, which :class:`AugmentedSplit` restates (the tests compare the two)."""
    api.load_torchvision()
    from torchvision.transforms import v2

    return v2.Compose(
        [
            v2.ToImage(),
            v2.RandomCrop(32, padding=4),
            v2.RandomHorizontalFlip(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(list(MEAN), list(STD)),
        ]
    )


class AugmentedSplit(Dataset[tuple[torch.Tensor, int]]):
    """The training split with :func:`_augment_transform` applied per image, computed on uint8 tensors.

    Why: torchvision's pipeline makes a PIL image per item and goes through five transforms; the GPU recipes
    (``*.gpu.yaml``) read 15-25 million augmented images per paper, and at about 5,000 images per CPU-second
    (BENCHMARKS.md "GPU recipes") the CPU would take longer than the GPU. Here the images are padded once (4 px
    of zeros, uint8, 240 MB for 50,000) and an item is a slice, an optional flip and the normalisation. The
    random draws are torchvision's, in its order, from the same global RNG (``RandomCrop``: the top, then the
    left offset, ``torch.randint(0, 9, ())`` each; ``RandomHorizontalFlip``: a flip when ``torch.rand(1) < 0.5``)
    and the arithmetic is its own (``x.to(float32).mul_(1/255)``, then ``sub(mean).div_(std)``), so every item
    equals the pipeline's bit for bit (``tests/data/test_datasets.py`` compares them).
    """

    def __init__(self, data: np.ndarray, targets: list[int]) -> None:
        images = torch.from_numpy(data).permute(0, 3, 1, 2)  # (N, 32, 32, 3) -> (N, 3, 32, 32), uint8
        self.padded = torch.nn.functional.pad(images, (PAD, PAD, PAD, PAD))  # zeros, as RandomCrop's fill 0
        self.targets = [int(y) for y in targets]
        self.mean = torch.as_tensor(MEAN, dtype=torch.float32).view(-1, 1, 1)
        self.std = torch.as_tensor(STD, dtype=torch.float32).view(-1, 1, 1)

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        span = 2 * PAD + 1  # offsets 0..8 of a 32 px crop in the 40 px padded image
        top = int(torch.randint(0, span, size=()))
        left = int(torch.randint(0, span, size=()))
        x = self.padded[index, :, top : top + 32, left : left + 32]
        if torch.rand(1) < 0.5:
            x = x.flip(-1)
        x = x.to(torch.float32).mul_(1.0 / 255)
        return x.sub(self.mean).div_(self.std), self.targets[index]


def describe(params: Params) -> api.DatasetShape:
    """CIFAR-10 as published (50,000/10,000 images of 3×32×32, 10 classes), without the files (``distrepro plan``)."""
    del params
    return api.DatasetShape(10, (3, 32, 32), 50_000, 10_000)


def build(params: Params, root: Path | None, seed: int) -> api.DatasetBundle:
    """Load both splits from ``root``; ``seed`` is unused (the data is fixed)."""
    del seed
    if root is None:
        raise api.ConfigError(
            None,
            "dataset.root",
            f"cifar10 needs dataset.root: a folder containing '{BASE_FOLDER}/' (torchvision's format); "
            "set download: true in dataset.params to fetch it there",
        )
    folder = root / BASE_FOLDER
    if not params.download and not folder.is_dir():
        raise api.ConfigError(
            root,
            "dataset.root",
            f"no CIFAR-10 found: expected the folder '{folder}' (torchvision's 'cifar-10-batches-py' with "
            "data_batch_1..5, test_batch, batches.meta); set download: true in dataset.params to fetch it",
        )
    cls = _dataset_class(params.verify_checksums)
    try:
        raw_train = _load_split(cls, root, train=True, download=params.download)
        raw_test = _load_split(cls, root, train=False, download=False)
    except (RuntimeError, OSError) as exc:
        hint = " (copies not from the official archive: set verify_checksums: false)" if params.verify_checksums else ""
        raise api.ConfigError(root, "dataset.root", f"cannot load CIFAR-10 from '{folder}': {exc}{hint}") from exc

    x_test, y_test = _to_tensors(raw_test.data, raw_test.targets)
    test_tensors = (x_test, y_test)
    if params.augment:
        train: Any = AugmentedSplit(raw_train.data, raw_train.targets)
        train_tensors = None
    else:
        train_tensors = _to_tensors(raw_train.data, raw_train.targets)
        train = TensorDataset(*train_tensors)
    return api.DatasetBundle(
        name=NAME,
        train=train,
        test=TensorDataset(*test_tensors),
        num_classes=10,
        input_shape=(3, 32, 32),
        train_tensors=train_tensors,
        test_tensors=test_tensors,
        description=f"{DESCRIPTION} [{len(raw_train)}/{len(raw_test)} loaded, augment={params.augment}]",
    )
