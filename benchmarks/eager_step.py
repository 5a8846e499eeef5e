"""One eager PyTorch training step, op by op: the host's floor and the GPU's roofline.

Why: with a fixed global batch, each GPU's batch shrinks as GPUs are added, and how a step's time shrinks with it
depends on what the step is made of. The emulator charges ``max(t_floor, t_fixed + b / peak)``
(:class:`distrepro.timing.compute.ComputeModel`); this script derives the three figures for the Decent-DP authors'
Transformer (WangZesen/Decentralized-Training-Exp @ 6817039, transformer/src/model.py: ``nn.Transformer`` 6+6
layers, d 512, 8 heads, FFN 2048, a 37,120-word vocabulary tied to the output projection, float key-padding
masks, a causal mask, dropout 0.1; config/train/transformer_base.toml: Adam, label smoothing 0.1, AMP) from the
ops one step dispatches, the GPUs' datasheets and two efficiency estimates, never from a measured step time:

* **host floor** (``t_floor``): the process CPU time of one step of a model with the same op structure at toy
  widths (d 16, a 64-word vocabulary, 2 sequences of 3-4 tokens), so that each op's arithmetic is negligible and
  what is left is dispatching it (Python, the dispatcher, autograd, autocast). ``time.process_time`` is what a
  busy machine disturbs least. A GPU does not finish a step before its host has issued it.
* **GPU roofline** (``t_fixed + b / peak``): every op of one step at the real widths, under autocast (bfloat16 on
  the CPU stands for float16 on the GPU: same bytes), its bytes read and written (tensor inputs and outputs) and
  its FLOPs (matrix products); on a GPU each op is a kernel taking ``k0 + max(bytes / (eta_mem * BW), FLOPs /
  (eta_flop * P))``, BW and P from the datasheet. Two token counts give the per-token slope (``1 / peak``) and the
  intercept (weight casts, the embedding's dense gradient: per step, not per token); ``t_fixed`` adds the
  kernels' ``k0`` and the optimizer's passes over the parameters (Adam and GradScaler's unscale, counted the
  same way), which also wait after the host floor (GradScaler's ``found_inf`` sync).

Constants: ``k0`` = 2.5 µs, a GPU's minimum time per kernel (launch latency and the ramp of a near-empty grid, a
few µs on Volta-Ampere [E], range 1.5-5); ``eta_mem`` = 0.8, the fraction of datasheet bandwidth streaming
kernels reach [E], range 0.6-0.9; ``eta_flop`` = 0.5, the fraction of the tensor-core peak cuBLAS reaches on
these shapes (d 512-2048, a few thousand rows) [E], range 0.3-0.7, and never above the rate a board's power cap
sustains where that is measured below it (``SUSTAINED_TENSOR_FLOPS``: the T4's 24 TFLOPS [M]). Datasheets [S]:
T4 65 TFLOPS mixed precision, 320 GB/s; A40 149.7 TFLOPS FP16 tensor, 696 GB/s; A100 40GB 312 TFLOPS FP16 tensor,
1,555 GB/s; V100 SXM2 125 TFLOPS, 900 GB/s; H200 SXM 989 TFLOPS dense FP16 tensor, 4.8 TB/s (for the held-out
check on a lent H200, ``benchmarks/gpu_strong_scaling.py``).

What it leaves out: on a GPU, dropout is one fused kernel and attention one SDPA kernel (the CPU path counted here
moves more bytes for them: the bytes per token are an upper bound by about 5 %); ``cudaLaunchKernel`` on the host
(a few µs per op, and the CPU kernel it replaces); the authors' CPUs and PyTorch (2.3) are not this machine's.

``step_ops`` and ``synced_step_s`` serve ``benchmarks/authors_batches.py``: the step's ops at any batch, and the
step when the host re-synchronises with its GPU (the authors' loop reads values back every step).

    python benchmarks/eager_step.py                 # the host floor (fast)
    python benchmarks/eager_step.py --roofline      # and the GPU roofline at the real widths (≈ 1 min CPU)
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import math
import statistics
import time
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

#: ops that create views or metadata only, or read a scalar back: no kernel on a GPU
VIEW_OPS = frozenset(
    {
        *("view", "_unsafe_view", "t", "transpose", "permute", "expand", "unsqueeze", "squeeze", "select", "slice"),
        *("as_strided", "detach", "alias", "reshape", "_reshape_alias", "split", "unbind", "chunk", "lift_fresh"),
        *("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "split_with_sizes"),
        *("_local_scalar_dense", "_record_function_enter_new", "_record_function_exit"),
    }
)
#: matrix products: (FLOPs from the shapes of the two operands)
MATMULS = frozenset({"mm", "addmm", "bmm", "baddbmm"})
#: datasheet peaks [S]: (FP16 tensor FLOP/s, memory bytes/s)
GPUS = {
    "t4": (65e12, 320e9),
    "a40": (149.7e12, 696e9),
    "a100": (312e12, 1555e9),
    "v100": (125e12, 900e9),
    "h200": (989.4e12, 4.8e12),
}
K0_S, ETA_MEM, ETA_FLOP = 2.5e-6, 0.8, 0.5
#: tensor-core rate a board sustains under its power cap, where a published measurement puts it below ``ETA_FLOP``
#: of the datasheet peak [M]: the T4 (70 W) runs a 4096^3 cuBLAS FP16 GEMM, continuously, at about 24 TFLOPS, 0.37 of
#: its 65 (NVIDIA Developer Forums, "About GPU peak performance", thread 264462, 2023: the reply from NVIDIA's
#: forum moderator attributes it to power capping, the expected behaviour of continuous matrix products on a T4).
#: Every other GPU here keeps the generic fraction: no measurement at hand puts its sustained rate below it (they
#: are boards of 300-700 W, not 70 W).
SUSTAINED_TENSOR_FLOPS = {"t4": 24e12}
#: the authors' shared BPE vocabulary (config/train/transformer_base.toml)
VOCAB = 37_120
#: one sample of the emulated workload (transformer_base_wmt14_195tok): 25,000 / 128 tokens
TOKENS_PER_SAMPLE = 25_000 / 128
#: GradScaler's unscale_ reads and writes every FP32 gradient: bytes per parameter
UNSCALE_BYTES_PER_PARAM = 8


class AuthorsTransformer(nn.Module):
    """The op structure of the authors' Transformer (see the module docstring) at any width."""

    def __init__(self, vocab: int, d: int, heads: int, ffn: int, layers: int = 6) -> None:
        super().__init__()
        self.d = d
        self.embed = nn.Embedding(vocab, d, padding_idx=0)
        self.core = nn.Transformer(
            d_model=d, nhead=heads, num_encoder_layers=layers, num_decoder_layers=layers,
            dim_feedforward=ffn, dropout=0.1, batch_first=True,
        )  # fmt: skip
        self.drop_src, self.drop_tgt = nn.Dropout(0.1), nn.Dropout(0.1)
        self.out = nn.Linear(d, vocab, bias=False)
        self.out.weight = self.embed.weight
        self.register_buffer("pe", torch.zeros(1, 400, d))

    @staticmethod
    def _padding(x: torch.Tensor) -> torch.Tensor:
        mask = (x != 0).float()
        return mask.masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        src_pad, tgt_pad = self._padding(src).detach(), self._padding(tgt).detach()
        causal = self.core.generate_square_subsequent_mask(tgt.size(1), device=tgt.device, dtype=torch.float32)
        pe = self.get_buffer("pe")
        a = self.drop_src(self.embed(src) * math.sqrt(self.d) + pe[:, : src.size(1)])
        b = self.drop_tgt(self.embed(tgt) * math.sqrt(self.d) + pe[:, : tgt.size(1)])
        h = self.core(
            a, b, tgt_mask=causal, src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
            memory_key_padding_mask=src_pad, tgt_is_causal=True,
        )  # fmt: skip
        return self.out(h)


def _nbytes(x: Any) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(y) for y in x)
    return 0


class _Ops(TorchDispatchMode):
    """Every kernel op dispatched: (name, bytes read and written, FLOPs)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, int, int]] = []
        self.views: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in VIEW_OPS:
            self.views[name] += 1
            return out
        flops = 0
        if name in MATMULS:
            a, w = (args[-2], args[-1]) if name in ("addmm", "baddbmm") else (args[0], args[1])
            flops = 2 * math.prod(a.shape) * w.shape[-1]
        self.ops.append((name, _nbytes(args) + _nbytes(list((kwargs or {}).values())) + _nbytes(out), flops))
        return out


def _setup(vocab: int, d: int, heads: int, ffn: int) -> tuple[nn.Module, Any, nn.Module]:
    torch.manual_seed(0)
    model = AuthorsTransformer(vocab, d, heads, ffn)
    opt = torch.optim.Adam(model.parameters(), lr=7e-4, foreach=True)
    return model, opt, nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)


def _forward_loss(
    model: nn.Module, loss_fn: nn.Module, src: torch.Tensor, tgt: torch.Tensor, vocab: int
) -> torch.Tensor:
    """The authors' forward and loss under autocast (teacher forcing: the target shifted by one)."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return loss_fn(model(src, tgt[:, :-1]).reshape(-1, vocab), tgt[:, 1:].reshape(-1))


def _forward_backward(model: nn.Module, loss_fn: nn.Module, src: torch.Tensor, tgt: torch.Tensor, vocab: int) -> None:
    _forward_loss(model, loss_fn, src, tgt, vocab).backward()


def host_floor(steps: int, reps: int) -> dict[str, Any]:
    """Kernel ops per step and the process CPU milliseconds per step at toy widths (median over ``reps``)."""
    torch.set_num_threads(1)
    vocab = 64
    model, opt, loss_fn = _setup(vocab, d=16, heads=8, ffn=16)
    src, tgt = torch.randint(1, vocab, (2, 3)), torch.randint(1, vocab, (2, 4))

    def step() -> None:
        opt.zero_grad()
        _forward_backward(model, loss_fn, src, tgt, vocab)
        opt.step()

    for _ in range(10):
        step()
    with _Ops() as counted:
        step()
    cpu_ms = []
    for _ in range(reps):
        start = time.process_time()
        for _ in range(steps):
            step()
        cpu_ms.append((time.process_time() - start) / steps * 1e3)
    median = statistics.median(cpu_ms)
    return {
        "torch": torch.__version__,
        "kernel_ops_per_step": len(counted.ops),
        "cpu_ms_per_step": [round(v, 2) for v in cpu_ms],
        "host_floor_ms": round(median, 2),
        "us_per_kernel_op": round(median / len(counted.ops) * 1e3, 1),
    }


def achieved_rates(gpu: str) -> tuple[float, float]:
    """FLOP/s and bytes/s one kernel of ``gpu`` reaches: ``ETA_FLOP`` of its tensor peak, no more than what its
    power cap sustains (``SUSTAINED_TENSOR_FLOPS``), and ``ETA_MEM`` of its memory bandwidth."""
    flops_s, bytes_s = GPUS[gpu]
    return min(ETA_FLOP * flops_s, SUSTAINED_TENSOR_FLOPS.get(gpu, math.inf)), ETA_MEM * bytes_s


def kernel_s(nbytes: float, flops: float, flop_rate: float, byte_rate: float) -> float:
    """Seconds of one op's work at the roofline (``k0`` left out), at achieved rates (:func:`achieved_rates`)."""
    return max(nbytes / byte_rate, flops / flop_rate)


def _kernel_s(ops: list[tuple[str, int, int]], flop_rate: float, byte_rate: float) -> float:
    """Seconds of the ops' work at the roofline (``k0`` left out: it is per step, not per token)."""
    return sum(kernel_s(b, f, flop_rate, byte_rate) for _, b, f in ops)


@functools.cache
def _real_width() -> tuple[nn.Module, Any, nn.Module]:
    torch.set_num_threads(1)
    return _setup(VOCAB, d=512, heads=8, ffn=2048)


def step_ops(tokens: int, length: int = 30) -> tuple[list[tuple[str, int, int]], int]:
    """The ops of one forward and backward at the real widths on about ``tokens`` source (and as many target)
    tokens, in sequences of ``length``, and how many of them the forward dispatched (the backward's follow)."""
    model, _, loss_fn = _real_width()
    rows = max(1, round(tokens / length))
    src, tgt = torch.randint(1, VOCAB, (rows, length)), torch.randint(1, VOCAB, (rows, length + 1))
    with _Ops() as counted:
        loss = _forward_loss(model, loss_fn, src, tgt, VOCAB)
        forward = len(counted.ops)
        loss.backward()
    model.zero_grad(set_to_none=True)
    return counted.ops, forward


def synced_step_s(gpu_s: list[float], host_s: float, syncs: int, forward: int | None = None) -> float:
    """Seconds of a step whose host issues op i at ``host_s`` each and whose GPU runs them in order (op i ends at
    ``max(end of op i-1, issue of op i) + gpu_s[i]``), restarted from a cold pipeline at every host sync: the step
    starts after the previous one's sync, and ``syncs - 1`` more (GradScaler's per-bucket ``found_inf``) fall at
    even shares of the ops after ``forward`` (the backward's; all of them when it is not given). A host that
    can run ahead across steps would pay only ``max(sum(gpu_s), len(gpu_s) * host_s)``."""
    first = forward if forward is not None else 0
    cuts = {first + (len(gpu_s) - first) * k // syncs - 1 for k in range(1, syncs)} - set(range(first))
    issued = done = 0.0
    for i, g in enumerate(gpu_s):
        issued += host_s
        done = max(done, issued) + g
        if i in cuts:
            issued = done  # the host waits for the GPU, then issues the next op
    return done


def roofline(tokens: tuple[int, int] = (600, 1200), length: int = 30) -> dict[str, Any]:
    """The real-width step's ops at two token counts, and per GPU: peak (samples/s), t_fixed and the optimizer's
    seconds (which the host floor waits for too)."""
    torch.set_num_threads(1)
    vocab = VOCAB
    model, opt, loss_fn = _setup(vocab, d=512, heads=8, ffn=2048)
    counted: dict[int, list[tuple[str, int, int]]] = {}
    for n in tokens:
        src = torch.randint(1, vocab, (n // length, length))
        tgt = torch.randint(1, vocab, (n // length, length + 1))
        with _Ops() as fb:
            _forward_backward(model, loss_fn, src, tgt, vocab)
        opt.step()  # the first step creates Adam's state: count the second
        opt.zero_grad(set_to_none=True)
        counted[n] = fb.ops
    _forward_backward(model, loss_fn, src, tgt, vocab)
    with _Ops() as step:
        opt.step()
    params = sum(p.numel() for p in model.parameters())
    opt_bytes = sum(b for _, b, _ in step.ops) + UNSCALE_BYTES_PER_PARAM * params
    lo, hi = tokens
    out: dict[str, Any] = {
        "kernels_fwd_bwd": len(counted[lo]),
        "bytes_per_token": (sum(b for _, b, _ in counted[hi]) - sum(b for _, b, _ in counted[lo])) / (hi - lo),
        "flops_per_token": (sum(f for *_, f in counted[hi]) - sum(f for *_, f in counted[lo])) / (hi - lo),
        "optimizer_bytes": opt_bytes,
        "params": params,
        "gpus": {},
    }
    for gpu in GPUS:
        flop_rate, byte_rate = achieved_rates(gpu)
        t_lo, t_hi = (_kernel_s(counted[n], flop_rate, byte_rate) for n in tokens)
        per_token = (t_hi - t_lo) / (hi - lo)
        intercept = t_lo - per_token * lo
        optimizer = opt_bytes / byte_rate
        out["gpus"][gpu] = {
            "peak_samples_per_s": round(1 / (per_token * TOKENS_PER_SAMPLE), 1),
            "per_token_us": round(per_token * 1e6, 2),
            "intercept_ms": round(intercept * 1e3, 2),
            "optimizer_ms": round(optimizer * 1e3, 2),
            "t_fixed_ms": round((len(counted[lo]) * K0_S + intercept + optimizer) * 1e3, 2),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--roofline", action="store_true", help="also the GPU roofline at the real widths")
    args = parser.parse_args(argv)
    out: dict[str, Any] = {"host": host_floor(args.steps, args.reps)}
    if args.roofline:
        out["roofline"] = roofline()
        for figures in out["roofline"]["gpus"].values():  # the host waits for the optimizer too (found_inf sync)
            figures["t_floor_ms"] = round(out["host"]["host_floor_ms"] + figures["optimizer_ms"], 2)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
