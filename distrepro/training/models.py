"""The models the harness can build, by name.

``small_cnn`` is the smoke/proxy model (about 100k parameters, cheap enough to run dozens of
virtual workers on a CPU); ``cnn1d`` is the MNIST-1D model of the mid scale. Both run faster as K replicas
stacked under ``vmap`` than one after another: their forward/backward 1.3× cheaper in CPU time for ``small_cnn``
at K = 8-64 and 2.0-2.4× for ``cnn1d`` at K = 16, a lockstep step 1.3-1.5× (``benchmarks/batched_replicas.py``,
BENCHMARKS.md), which the in-process engine does when a config sets ``batched_replicas``
(:mod:`distrepro.training.replica_batch`). ``resnet18_cifar`` is the ResNet-18 that CIFAR
papers actually train (kuangliu/pytorch-cifar: 3×3 stem, no max-pool), written here in plain
torch so that it does not depend on torchvision; ``resnet18``/``resnet50`` are the ImageNet models
from torchvision (imported through :mod:`distrepro.data.torchvision_shim`).

BatchNorm is kept as in the papers. Its running statistics are buffers, and the harness averages
buffers together with parameters whenever it averages models (evaluation of the "average" model,
Local-SGD style synchronisation), so every replica's statistics contribute.

Initialisation draws from torch's global RNG; the harness seeds it (``distrepro.seeding``) before
calling :func:`build_model` so that every replica starts from the same weights.

Per-model options arrive as ``**params`` (from ``model.params`` in a run config) and are
validated by a pydantic model, so a typo is a :class:`~distrepro.errors.ConfigError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pydantic
import torch
import torch.nn.functional as F
from pydantic import BaseModel, ConfigDict, Field
from torch import nn

from distrepro.data import torchvision_shim as _torchvision
from distrepro.errors import ConfigError, format_pydantic_error

MODEL_NAMES: tuple[str, ...] = ("small_cnn", "cnn1d", "resnet18_cifar", "resnet18", "resnet50", "resnet152", "vit_b_16")


class _NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SmallCNNParams(_NoParams):
    #: width of the hidden fully connected layer (80 → 102,202 parameters for 3 channels, 10 classes)
    hidden: int = Field(80, ge=1)


class CNN1dParams(_NoParams):
    #: channels of each of the three convolutions (32 → 6,570 parameters on 40-point signals)
    width: int = Field(32, ge=1)


class ResNetCIFARParams(_NoParams):
    #: channels of the first stage; stages use width, 2·width, 4·width, 8·width (64 = the paper model)
    width: int = Field(64, ge=1)


class SmallCNN(nn.Module):
    """conv(C→32,3) → ReLU → maxpool → conv(32→64,3) → ReLU → maxpool → pool 4×4 → fc → ReLU → fc.

    The adaptive pool to 4×4 makes the parameter count independent of the image size, so the
    same model runs on 16 px synthetic data and 32 px CIFAR images (any size ≥ 8).
    """

    def __init__(self, in_channels: int, num_classes: int, hidden: int = 80) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 32, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, kernel_size=3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d((4, 4))
        self.fc1 = nn.Linear(64 * 4 * 4, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(self.pool(x), 1)
        return self.fc2(F.relu(self.fc1(x)))


class CNN1d(nn.Module):
    """Three strided 1D convolutions and a linear layer: the MNIST-1D paper's CNN (Greydanus & Kobak,
    github.com/greydanus/mnist1d, ``models.py`` ``ConvBase``: kernels 5, 3, 3, stride 2, padding 1).

    Inputs are ``(N, C, 1, L)`` (a signal as an image of height 1, so the harness's (C, H, W) shapes
    hold). An adaptive pool to 5 points (the identity on MNIST-1D's 40 points, whose last feature
    map is 5 wide) keeps the parameter count independent of ``L``.
    """

    def __init__(self, in_channels: int, num_classes: int, width: int = 32) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(in_channels, width, 5, stride=2, padding=1)
        self.conv2 = nn.Conv1d(width, width, 3, stride=2, padding=1)
        self.conv3 = nn.Conv1d(width, width, 3, stride=2, padding=1)
        self.pool = nn.AdaptiveAvgPool1d(5)
        self.fc = nn.Linear(width * 5, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(2)  # (N, C, 1, L) -> (N, C, L)
        x = F.relu(self.conv3(F.relu(self.conv2(F.relu(self.conv1(x))))))
        return self.fc(torch.flatten(self.pool(x), 1))


class BasicBlock(nn.Module):
    """The two-conv residual block of ResNet-18 (kuangliu/pytorch-cifar ``models/resnet.py``)."""

    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut: nn.Module = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNetCIFAR(nn.Module):
    """CIFAR ResNet-18: 3×3 stride-1 stem, no max-pool, four stages of two blocks, global pool.

    Identical to kuangliu's model at ``width=64`` (11,173,962 parameters for 10 classes), except
    that the final ``avg_pool2d(out, 4)`` is an adaptive pool, so other image sizes work too.
    """

    def __init__(self, in_channels: int, num_classes: int, width: int = 64) -> None:
        super().__init__()
        self.in_planes = width
        self.conv1 = nn.Conv2d(in_channels, width, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.layer1 = self._make_layer(width, 2, stride=1)
        self.layer2 = self._make_layer(2 * width, 2, stride=2)
        self.layer3 = self._make_layer(4 * width, 2, stride=2)
        self.layer4 = self._make_layer(8 * width, 2, stride=2)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.linear = nn.Linear(8 * width, num_classes)

    def _make_layer(self, planes: int, blocks: int, stride: int) -> nn.Sequential:
        layers: list[nn.Module] = []
        for s in [stride] + [1] * (blocks - 1):
            layers.append(BasicBlock(self.in_planes, planes, s))
            self.in_planes = planes
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        return self.linear(torch.flatten(self.pool(out), 1))


def _torchvision_resnet(arch: str) -> Callable[[int, int, BaseModel], nn.Module]:
    def make(in_channels: int, num_classes: int, params: BaseModel) -> nn.Module:
        del params
        tv = _torchvision.load()
        model: nn.Module = getattr(tv.models, arch)(weights=None, num_classes=num_classes)
        if in_channels != 3:  # keep the ImageNet stem, only change its input channels
            model.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
        return model

    return make


def _vit_b_16(in_channels: int, num_classes: int, params: BaseModel) -> nn.Module:
    """torchvision ViT-B/16 at the input's side (QSR's ViT recipe; its reference uses vit-pytorch's SimpleViT,
    same width/depth/heads/MLP but a class token and learned position embedding here: same parameter count
    to 0.1 %, which is what a plan's bytes and a time charge need)."""
    del params
    if in_channels != 3:
        raise ConfigError(None, "model.name", f"vit_b_16 takes 3-channel images, got {in_channels}")
    return _torchvision.load().models.vit_b_16(weights=None, num_classes=num_classes)


def _small_cnn(in_channels: int, num_classes: int, params: BaseModel) -> nn.Module:
    assert isinstance(params, SmallCNNParams)
    return SmallCNN(in_channels, num_classes, hidden=params.hidden)


def _cnn1d(in_channels: int, num_classes: int, params: BaseModel) -> nn.Module:
    assert isinstance(params, CNN1dParams)
    return CNN1d(in_channels, num_classes, width=params.width)


def _resnet18_cifar(in_channels: int, num_classes: int, params: BaseModel) -> nn.Module:
    assert isinstance(params, ResNetCIFARParams)
    return ResNetCIFAR(in_channels, num_classes, width=params.width)


# name -> (params model, builder, smallest supported image side)
_REGISTRY: dict[str, tuple[type[BaseModel], Callable[[int, int, BaseModel], nn.Module], int]] = {
    "small_cnn": (SmallCNNParams, _small_cnn, 8),
    "cnn1d": (CNN1dParams, _cnn1d, 1),  # 1D signals as (C, 1, L): the height may be 1, the length is checked
    "resnet18_cifar": (ResNetCIFARParams, _resnet18_cifar, 8),
    "resnet18": (_NoParams, _torchvision_resnet("resnet18"), 16),
    "resnet50": (_NoParams, _torchvision_resnet("resnet50"), 16),
    "resnet152": (_NoParams, _torchvision_resnet("resnet152"), 16),
    "vit_b_16": (_NoParams, _vit_b_16, 224),  # fixed 224x224 input (14x14 patches of 16)
}


def build_model(name: str, num_classes: int, input_shape: tuple[int, int, int], **params: Any) -> nn.Module:
    """Build model ``name`` for ``num_classes`` classes and inputs of shape ``(C, H, W)``.

    Raises :class:`ConfigError` (field ``model.name`` / ``model.params.*`` / ``model``) for an
    unknown name, a bad option, or an input too small for the model's down-sampling.
    """
    if name not in _REGISTRY:
        raise ConfigError(None, "model.name", f"unknown model {name!r}; known: {', '.join(MODEL_NAMES)}")
    params_cls, make, min_side = _REGISTRY[name]
    try:
        validated = params_cls.model_validate(params)
    except pydantic.ValidationError as exc:
        inner = format_pydantic_error(None, exc)
        field = f"model.params.{inner.field}" if inner.field else "model.params"
        raise ConfigError(None, field, f"{inner.message} (model {name!r})") from exc
    if num_classes < 1:
        raise ConfigError(None, "model", f"num_classes must be >= 1, got {num_classes}")
    c, h, w = (int(d) for d in input_shape)
    if name == "cnn1d":
        if c < 1 or h != 1 or w < 8:
            raise ConfigError(
                None, "model.name", f"model 'cnn1d' needs signals of shape (C, 1, L ≥ 8), got {c}×{h}×{w}"
            )
        return make(c, num_classes, validated)
    if c < 1 or min(h, w) < min_side:
        raise ConfigError(
            None,
            "model.name",
            f"model {name!r} needs images of at least {min_side}×{min_side}, got {c}×{h}×{w}",
        )
    return make(c, num_classes, validated)
