"""Datasets as the harness sees them, and the loading of dataset plugins.

A dataset plugin is a single file under ``datasets/`` (``synthetic.py``, ``cifar10.py``, ...) that
defines ``NAME``, ``DESCRIPTION``, a pydantic ``Params`` model and
``build(params, root, seed) -> DatasetBundle``, and optionally ``describe(params) -> DatasetShape``
(classes, shape and sizes without reading data, for ``distrepro plan``). Plugin files are imported **by path** under the
private package name ``_distrepro_datasets`` rather than as an importable ``datasets`` package:
a top-level ``datasets`` module would shadow (or be shadowed by) Hugging Face's ``datasets``,
which many users have installed (it is imported as ``datasets``).

The harness only ever talks to a :class:`DatasetBundle`, so adding a dataset never touches the
harness.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pydantic
import torch

from distrepro.errors import ConfigError, DataError, DistreproError, PluginError, format_pydantic_error

#: private parent package under which plugin files are registered in ``sys.modules``
PLUGIN_PACKAGE = "_distrepro_datasets"

_REQUIRED_ATTRIBUTES = ("NAME", "DESCRIPTION", "Params", "build")


class SizedDataset(Protocol):
    """A map-style dataset with a length: what the harness needs of a split (torch's ``Dataset`` does
    not declare ``__len__``, though sampling, sharding and epochs all need it)."""

    def __getitem__(self, index: int) -> Any: ...

    def __len__(self) -> int: ...


@dataclass(frozen=True)
class DatasetShape:
    """What a dataset is without loading it: the optional ``describe(params)`` of a plugin returns one, so
    ``distrepro plan`` works where the data is absent (a paper-scale set on a laptop). ``note`` says what
    is nominal rather than counted (ImageNet-100's split sizes)."""

    num_classes: int
    input_shape: tuple[int, int, int]
    train_size: int
    test_size: int
    note: str | None = None


@dataclass
class DatasetBundle:
    """One dataset, ready for the harness: both splits plus what the model needs to know.

    ``train``/``test`` are map-style datasets returning ``(x, y)`` with ``x`` a float tensor of
    shape ``input_shape`` and ``y`` an integer class. ``train_tensors``/``test_tensors`` are an
    optional fast path for data that fits in memory: ``(inputs (N, C, H, W) float32, targets (N,)
    int64)`` holding exactly what the corresponding dataset returns item by item, so that the
    streams can gather a batch with one indexing operation instead of N Python calls.
    """

    name: str
    train: SizedDataset
    test: SizedDataset
    num_classes: int
    input_shape: tuple[int, int, int]
    train_tensors: tuple[torch.Tensor, torch.Tensor] | None = None
    test_tensors: tuple[torch.Tensor, torch.Tensor] | None = None
    description: str = ""

    def __post_init__(self) -> None:
        # Checked here, once, so that a plugin bug shows up at load time with the plugin's name
        # rather than as a shape error in the middle of a training run.
        if self.num_classes < 1:
            raise ValueError(f"dataset '{self.name}': num_classes must be >= 1, got {self.num_classes}")
        if len(self.input_shape) != 3 or any(int(d) < 1 for d in self.input_shape):
            raise ValueError(f"dataset '{self.name}': input_shape must be (C, H, W), got {self.input_shape}")
        self.input_shape = (int(self.input_shape[0]), int(self.input_shape[1]), int(self.input_shape[2]))
        for split in ("train", "test"):
            tensors = getattr(self, f"{split}_tensors")
            if tensors is not None:
                self._check_tensors(split, tensors)

    def _check_tensors(self, split: str, tensors: tuple[torch.Tensor, torch.Tensor]) -> None:
        inputs, targets = tensors
        if tuple(inputs.shape[1:]) != self.input_shape:
            raise ValueError(
                f"dataset '{self.name}': {split}_tensors inputs have shape {tuple(inputs.shape)}, "
                f"expected (N, *{self.input_shape})"
            )
        if targets.dim() != 1 or targets.shape[0] != inputs.shape[0]:
            raise ValueError(
                f"dataset '{self.name}': {split}_tensors targets must have shape ({inputs.shape[0]},), "
                f"got {tuple(targets.shape)}"
            )
        if targets.dtype != torch.int64:
            raise ValueError(f"dataset '{self.name}': {split}_tensors targets must be int64, got {targets.dtype}")

    def split(self, name: str) -> SizedDataset:
        """The ``"train"`` or ``"test"`` dataset."""
        if name not in ("train", "test"):
            raise ValueError(f"unknown split {name!r}; expected 'train' or 'test'")
        return self.train if name == "train" else self.test

    def tensors(self, name: str) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The in-memory fast path of split ``name``, or ``None``."""
        if name not in ("train", "test"):
            raise ValueError(f"unknown split {name!r}; expected 'train' or 'test'")
        return self.train_tensors if name == "train" else self.test_tensors

    def split_size(self, name: str) -> int:
        """Number of samples in split ``name``."""
        tensors = self.tensors(name)
        if tensors is not None:
            return int(tensors[1].shape[0])
        return len(self.split(name))


def _ensure_parent_package() -> None:
    # pickle resolves "a.b" through ``__import__``, which needs the parent "a" in sys.modules; an
    # empty namespace-like module is enough and keeps plugins picklable (spawned DataLoader workers).
    if PLUGIN_PACKAGE not in sys.modules:
        parent = types.ModuleType(PLUGIN_PACKAGE)
        parent.__path__ = []
        parent.__doc__ = "Private parent package of distrepro dataset plugins loaded by path."
        sys.modules[PLUGIN_PACKAGE] = parent


def _check_plugin(path: Path, module: types.ModuleType) -> None:
    missing = [name for name in _REQUIRED_ATTRIBUTES if not hasattr(module, name)]
    if missing:
        raise PluginError(f"dataset plugin {path} does not define {', '.join(missing)}")
    params_cls = module.Params
    if not (isinstance(params_cls, type) and issubclass(params_cls, pydantic.BaseModel)):
        raise PluginError(f"dataset plugin {path}: Params must be a pydantic.BaseModel subclass")
    if not callable(module.build):
        raise PluginError(f"dataset plugin {path}: build must be callable")


def load_dataset_plugin(path: Path) -> types.ModuleType:
    """Import the dataset plugin file ``path`` as ``_distrepro_datasets.<stem>``.

    The file is executed afresh on every call (no cache), so an edited plugin is picked up.
    Raises :class:`PluginError` if the file is missing, fails to import, or lacks one of
    ``NAME``, ``DESCRIPTION``, ``Params``, ``build``.
    """
    path = Path(path)
    if not path.is_file():
        raise PluginError(f"dataset plugin file not found: {path}")
    module_name = f"{PLUGIN_PACKAGE}.{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"cannot import dataset plugin {path}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    _ensure_parent_package()
    previous = sys.modules.get(module_name)
    sys.modules[module_name] = module  # registered before exec, as importlib does (dataclasses need it)
    try:
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise PluginError(f"dataset plugin {path} failed to import: {type(exc).__name__}: {exc}") from exc
        _check_plugin(path, module)
    except PluginError:
        # leave sys.modules as it was: a broken plugin must not replace a working one
        if previous is not None:
            sys.modules[module_name] = previous
        else:
            sys.modules.pop(module_name, None)
        raise
    return module


def build_dataset(
    plugin: types.ModuleType,
    params: Mapping[str, Any] | None,
    root: str | Path | None,
    seed: int,
    source: str | Path | None = None,
) -> DatasetBundle:
    """Validate ``params`` with the plugin's ``Params`` and build the dataset.

    A validation error becomes a :class:`ConfigError` whose field is prefixed with
    ``dataset.params.`` so that the user is pointed at the right entry of the run config
    (``source``).
    """
    try:
        validated = plugin.Params.model_validate(dict(params or {}))
    except pydantic.ValidationError as exc:
        inner = format_pydantic_error(source, exc)
        field = f"dataset.params.{inner.field}" if inner.field else "dataset.params"
        raise ConfigError(source, field, inner.message) from exc
    try:
        bundle = plugin.build(validated, Path(root) if root is not None else None, int(seed))
    except ConfigError as exc:  # a plugin names the data folder; the user edits the run config
        if source is None or exc.source in (None, str(source)):
            raise
        message = exc.message if exc.source in exc.message else f"{exc.message} (in '{exc.source}')"
        raise ConfigError(source, exc.field, message) from exc
    except DistreproError:
        raise
    except Exception as exc:  # the plugin's own failure: named with its file; the traceback is for --debug
        text = str(exc).strip().splitlines()
        raise PluginError(
            f"dataset plugin {getattr(plugin, 'NAME', plugin.__name__)} ({getattr(plugin, '__file__', '?')}) raised: "
            f"{type(exc).__name__}: {text[0] + (' ...' if len(text) > 1 else '') if text else ''}"
        ) from exc
    if not isinstance(bundle, DatasetBundle):
        raise PluginError(
            f"dataset plugin {getattr(plugin, 'NAME', plugin.__name__)}: build() returned "
            f"{type(bundle).__name__}, expected distrepro.data.loading.DatasetBundle"
        )
    return bundle


#: ImageNet channel statistics (torchvision's pretrained-model convention), used by the ImageNet loaders
IMAGENET_MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
IMAGENET_STD: tuple[float, float, float] = (0.229, 0.224, 0.225)


def load_image(path: str) -> Any:
    """The image file ``path`` as an RGB PIL image: the ``loader`` of the image-folder datasets.

    torchvision's default loader meets a file that is not an image (a stray text file named ``.JPEG``, a
    truncated download) with PIL's ``UnidentifiedImageError`` about a file object, minutes into a run; this
    one raises :class:`~distrepro.errors.DataError` naming the file, which the run reports as one line.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with open(path, "rb") as f:
            return Image.open(f).convert("RGB")
    except UnidentifiedImageError:
        raise DataError(f"not an image: {path}") from None
    except (OSError, SyntaxError, ValueError) as exc:  # truncated or corrupt: what PIL raises for those
        raise DataError(f"not a readable image: {path} ({exc})") from None


def imagenet_transform(image_size: int, augment: bool) -> Any:
    """The ImageNet recipe's image pipeline, shared by the ImageNet-1k and ImageNet-100 folder loaders:
    RandomResizedCrop + horizontal flip when ``augment``, else resize to 256/224 of ``image_size`` and
    center-crop; then tensor, float in [0, 1], normalised by the ImageNet statistics."""
    from distrepro.data import torchvision_shim as _torchvision

    _torchvision.load()
    from torchvision.transforms import v2

    if augment:
        geometric = [v2.RandomResizedCrop(image_size, antialias=True), v2.RandomHorizontalFlip()]
    else:
        geometric = [v2.Resize(round(image_size * 256 / 224), antialias=True), v2.CenterCrop(image_size)]
    return v2.Compose(
        [
            *geometric,
            v2.ToImage(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(list(IMAGENET_MEAN), list(IMAGENET_STD)),
        ]
    )
