"""The two event updates of A²CiD² and the exact mixing between events, on flat vectors.

Between events the pair (x, x̃) follows d/dt [x; x̃] = [[−η, η], [η, −η]] [x; x̃] (paper §3, the
continuous momentum). Its flow over Δ time units is ½ [[1+e, 1−e], [1−e, 1+e]] with e = exp(−2ηΔ):
x + x̃ is kept and x − x̃ shrinks by e. The reference (github.com/AdelNabli/ACiD @ 89393fd, ``adp.py``
and ``p2p_averaging.py``) evaluates the same 2×2 exponential with ``matrix_exp`` and applies it lazily at
every event, forward from the worker's last event; here it is the closed form, written as
x += b (x̃ − x), x̃ −= b (x̃ − x) with b = (1 − e)/2.

A pairwise averaging with the peer's vector x_j (as sent, not mixed forward, as in the reference) first
mixes forward to the event, then x̃ += α̃ (x_j − x) and x += α (x_j − x), α = ½. A gradient event mixes
forward, then x and x̃ take the same optimizer step. η = 0 (no x̃) is the asynchronous baseline.

These functions are the plugin's only copy of the dynamics: the training method and the pure-gossip
consensus simulation both call them.
"""

from __future__ import annotations

import math

import torch


def mixing_weight(eta: float, elapsed: float) -> float:
    """b = (1 − exp(−2 η Δ)) / 2: the fraction of x̃ − x that moves over ``elapsed`` time units."""
    if elapsed < 0:
        raise ValueError(f"mixing backwards in time ({elapsed})")
    return 0.5 * (-math.expm1(-2.0 * eta * elapsed))


def mix_(x: torch.Tensor, x_tilde: torch.Tensor, eta: float, elapsed: float) -> None:
    """Apply the mixing flow over ``elapsed`` time units to (x, x̃) in place."""
    b = mixing_weight(eta, elapsed)
    if b == 0.0:
        return
    diff = x_tilde - x
    x.add_(diff, alpha=b)
    x_tilde.sub_(diff, alpha=b)


def average_(
    x: torch.Tensor, x_tilde: torch.Tensor | None, peer: torch.Tensor, alpha: float, alpha_tilde: float
) -> None:
    """The exchange update with the peer's vector, in place: x̃ += α̃ (x_j − x), then x += α (x_j − x)."""
    m = peer - x
    if x_tilde is not None:
        x_tilde.add_(m, alpha=alpha_tilde)
    x.add_(m, alpha=alpha)
