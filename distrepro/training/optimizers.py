"""The optimizer factory the harness owns: ``optimizer:`` in a run config or a method's params.

SGD (momentum, Nesterov, coupled weight decay), Adam and AdamW are torch's own. AccumAdam and
AccumAdamW are Decent-DP's (Wang et al., ICLR 2025, Alg. 4 / App. C), restated from the published
package ``decent-dp`` (``decent_dp/optim.py``, v0.2.3) rather than from the paper text, whose
appendix reportedly has a typo in the second-moment update; ``tests/test_optimizers.py`` checks
this restatement against the package step by step.

AccumAdam keeps Adam's two moments but refreshes them only every ``accum_iter`` steps, from the
average gradient of that window; in between, each step uses the moments *as if* the current
gradient were folded in (a look-ahead ``m + (1-β1)·g``, ``v + (1-β2)·g²``). The stored moments are
kept pre-multiplied by β, so with ``accum_iter = 1`` the look-ahead is exactly Adam's moment and
the optimizer is Adam. Bias corrections count refreshes: ``ceil(step / accum_iter)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

from distrepro.api.optimizer_config import OptimizerConfig

__all__ = ["AccumAdam", "OptimizerConfig", "build_optimizer"]


def build_optimizer(
    params: Iterable[torch.Tensor] | Iterable[dict[str, Any]], cfg: OptimizerConfig
) -> torch.optim.Optimizer:
    """The optimizer ``cfg`` names over ``params`` (a model's ``parameters()`` or param groups)."""
    if cfg.name == "sgd":
        nesterov = cfg.nesterov and cfg.momentum > 0
        return torch.optim.SGD(
            params, lr=cfg.lr, momentum=cfg.momentum, nesterov=nesterov, weight_decay=cfg.weight_decay
        )
    if cfg.name == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)
    if cfg.name == "adamw":
        return torch.optim.AdamW(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps, weight_decay=cfg.weight_decay)
    decoupled = cfg.name == "accum_adamw"
    return AccumAdam(params, cfg.lr, cfg.betas, cfg.eps, cfg.weight_decay, cfg.accum_iter, decoupled=decoupled)


class AccumAdam(torch.optim.Optimizer):
    """Decent-DP's AccumAdam (``decoupled=False``: L2 added to the gradient) or AccumAdamW (decoupled)."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        accum_iter: int = 4,
        decoupled: bool = False,
    ) -> None:
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay, "accum_iter": accum_iter}
        super().__init__(params, defaults)
        self.decoupled = decoupled

    @torch.no_grad()
    def step(self, closure: None = None) -> None:  # type: ignore[override]
        if closure is not None:
            raise ValueError("AccumAdam does not take a closure")
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, wd, eps, s = group["lr"], group["weight_decay"], group["eps"], group["accum_iter"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0, dtype=torch.int64)
                    for key in ("exp_avg", "exp_avg_sq", "accum_grad"):
                        state[key] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                step = int(state["step"])
                grad = p.grad
                if wd != 0 and self.decoupled:
                    p.mul_(1 - lr * wd)
                elif wd != 0:
                    grad.add_(p, alpha=wd)  # in place, as the reference does: p.grad carries the L2 term
                m, v, acc = state["exp_avg"], state["exp_avg_sq"], state["accum_grad"]
                acc.add_(grad, alpha=1.0 / s)
                refreshes = (step + s - 1) // s
                m_look = m.add(grad, alpha=1 - beta1)
                denom = v.addcmul(grad, grad, value=1 - beta2).sqrt_()
                denom.div_(math.sqrt(1 - beta2**refreshes)).add_(eps)
                p.addcdiv_(m_look, denom, value=-lr / (1 - beta1**refreshes))
                if step % s == 0:  # end of a window: fold its mean gradient into the stored moments
                    m.add_(acc, alpha=1 - beta1).mul_(beta1)
                    v.addcmul_(acc, acc, value=1 - beta2).mul_(beta2)
                    acc.zero_()
