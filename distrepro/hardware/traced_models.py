"""The real architectures of the emulated workloads, for tracing their layer tables on the meta device.

Each builder returns the architecture at the size ``hardware_profiles/workloads.yaml`` charges (torchvision's
ResNets and ViT-B/16; Transformer-base and GPT-2 small from ``torch.nn`` layers), so the per-layer table
(:mod:`distrepro.hardware.layer_tables`) is the emulated model's and never the proxy's. Nothing here is trained.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from distrepro.data import torchvision_shim


def _resnet(depth: int, classes: int, cifar: bool = False) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        models = torchvision_shim.load().models
        model = getattr(models, f"resnet{depth}")(num_classes=classes)
        if cifar:  # kuangliu/pytorch-cifar stem: 3x3 stride-1 convolution, no max-pool
            model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
            model.maxpool = nn.Identity()
        return model

    return build


def _vit_b16() -> nn.Module:
    return torchvision_shim.load().models.vit_b_16()


class Seq2SeqTransformer(nn.Module):
    """Transformer-base (Vaswani et al. 2017, Table 3 "base": 6+6 layers, d 512, FFN 2048, 8 heads) with one
    embedding shared by source, target and the output projection (fairseq ``--share-all-embeddings``)."""

    def __init__(self, vocab: int = 37_120, d: int = 512, heads: int = 8, ffn: int = 2048, layers: int = 6) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.core = nn.Transformer(d, heads, layers, layers, ffn, dropout=0.0, batch_first=True)
        self.out = nn.Linear(d, vocab, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        return self.out(self.core(x, x))


class GPT2(nn.Module):
    """GPT-2 small as nanoGPT builds it (12 layers, d 768, 12 heads, context 1,024, vocabulary 50,304, tied
    output projection; karpathy/nanoGPT ``model.py``)."""

    def __init__(self, vocab: int = 50_304, ctx: int = 1024, d: int = 768, heads: int = 12, layers: int = 12) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(ctx, d)
        block = nn.TransformerEncoderLayer(
            d, heads, 4 * d, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(t, device=tokens.device))
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=tokens.device)
        return self.lm_head(self.ln_f(self.blocks(x, mask=mask, is_causal=True)))


#: workload name -> (builder, one sample's shape: C x H x W for images, (tokens,) for text)
ARCHITECTURES: dict[str, tuple[Callable[[], Any], tuple[int, ...]]] = {
    "resnet18_in100_224": (_resnet(18, 100), (3, 224, 224)),
    "resnet18_in1k_224": (_resnet(18, 1000), (3, 224, 224)),
    "resnet50_in100_224": (_resnet(50, 100), (3, 224, 224)),
    "resnet50_in1k_224": (_resnet(50, 1000), (3, 224, 224)),
    "resnet152_in1k_224": (_resnet(152, 1000), (3, 224, 224)),
    "resnet18_cifar_32": (_resnet(18, 10, cifar=True), (3, 32, 32)),
    "resnet50_cifar_32": (_resnet(50, 10, cifar=True), (3, 32, 32)),
    "vit_b16_224": (_vit_b16, (3, 224, 224)),
    "transformer_base_wmt14_195tok": (Seq2SeqTransformer, (195,)),
    "gpt2_small_owt_1024tok": (GPT2, (1024,)),
}
