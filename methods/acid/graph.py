"""Communication graphs of A²CiD² and the constants its momentum takes from them.

Restated from the paper (Nabli, Belilovsky, Oyallon, NeurIPS 2023, arXiv 2306.08289, §3, Prop. 3.6) and
from how the official code builds the graph (github.com/AdelNabli/ACiD @ 89393fd, ``utils/graph_utils.py``):

* neighbour lists: ring i ± 1; exponential i + 2^k then i − 2^k for k < log2 n (even ranks take the minus
  half first), so the antipodal i ± n/2 is listed twice and weighs double; complete: every other rank;
* W[i, j] += 1/|N_i| for every entry j of i's list, and the communication Laplacian is Λ = r (I − W) for
  ``rate`` r (expected pairwise averagings per worker per gradient);
* χ₁ = 1 / λ⁺_min(Λ) (inverse algebraic connectivity), χ₂ = max over edges ½ (e_i − e_j)ᵀ Λ⁺ (e_i − e_j);
* α = ½, α̃ = ½ √(χ₁/χ₂), η = 1 / (2 √(χ₁ χ₂)).

On the complete graph χ₁ = χ₂, so the momentum brings nothing; the reference refuses it and so does the plugin.
Pure functions of (topology, n, rate), so ``distrepro plan`` and every rank compute the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

Topology = Literal["ring", "exponential", "complete"]
TOPOLOGIES: tuple[str, ...] = ("ring", "exponential", "complete")


def graph_problem(topology: str, n: int) -> str | None:
    """Why ``topology`` cannot be built on ``n`` workers, or None."""
    if topology not in TOPOLOGIES:
        return f"unknown topology {topology!r} (ring, exponential or complete)"
    if n < 2:
        return f"a communication graph needs at least two workers, not {n}"
    if topology == "exponential" and n & (n - 1):
        return f"the exponential graph needs a power-of-two number of workers, not {n}"
    return None


def neighbours(topology: str, rank: int, n: int) -> list[int]:
    """``rank``'s neighbour list, duplicates kept (a duplicate is picked twice as often and weighs double)."""
    problem = graph_problem(topology, n)
    if problem is not None:
        raise ValueError(problem)
    if topology == "ring":
        return [(rank - 1) % n] if n == 2 else [(rank - 1) % n, (rank + 1) % n]
    if topology == "complete":
        return [j for j in range(n) if j != rank]
    k = int(math.log2(n))
    plus = [(rank + 2**i) % n for i in range(k)]
    minus = [(rank - 2**i) % n for i in range(k)]
    return minus + plus if rank % 2 == 0 else plus + minus


def laplacian(topology: str, n: int, rate: float) -> torch.Tensor:
    """Λ = rate · (I − W), W[i, j] = (times j is in i's list) / |N_i|, in float64."""
    w = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        nb = neighbours(topology, i, n)
        for j in nb:
            w[i, j] += 1.0 / len(nb)
    return rate * (torch.eye(n, dtype=torch.float64) - w)


@dataclass(frozen=True)
class Constants:
    """χ₁, χ₂ of the graph at this rate and the momentum's constants derived from them."""

    topology: str
    world_size: int
    rate: float
    chi1: float
    chi2: float
    alpha: float
    alpha_tilde: float
    eta: float


def constants(topology: str, n: int, rate: float) -> Constants:
    """The A²CiD² constants for ``topology`` on ``n`` workers at ``rate`` (Prop. 3.6, as the reference computes).

    ``rate`` 0 has no communication and no constants: a clear error. Λ is symmetric for the three graphs
    (regular lists), so its eigen-decomposition gives both λ⁺_min and the pseudo-inverse.
    """
    if not rate > 0:
        raise ValueError(f"the A²CiD² constants need a communication rate > 0, not {rate}")
    lap = laplacian(topology, n, rate)
    evals, evecs = torch.linalg.eigh(lap)
    tol = 1e-9 * float(evals.abs().max())
    nonzero = evals > tol
    chi1 = 1.0 / float(evals[nonzero].min())
    inv = torch.where(nonzero, 1.0 / torch.where(nonzero, evals, torch.ones_like(evals)), torch.zeros_like(evals))
    pinv = (evecs * inv) @ evecs.T
    chi2 = 0.0
    for i in range(n):
        for j in set(neighbours(topology, i, n)):
            d = torch.zeros(n, dtype=torch.float64)
            d[i], d[j] = 1.0, -1.0
            chi2 = max(chi2, 0.5 * float(d @ pinv @ d))
    return Constants(
        topology=topology,
        world_size=n,
        rate=float(rate),
        chi1=chi1,
        chi2=chi2,
        alpha=0.5,
        alpha_tilde=0.5 * math.sqrt(chi1 / chi2),
        eta=1.0 / (2.0 * math.sqrt(chi1 * chi2)),
    )
