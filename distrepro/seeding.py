"""Derived seeds.

Seeds are never drawn: every random stream is seeded from a hash of what identifies it
(paper, method, profile, seed index, rank, stream name), as benchopt does. Two streams that
differ in any part get unrelated seeds; the same parts always give the same seed, on every
machine and Python version (sha256, not ``hash()``).
"""

from __future__ import annotations

import hashlib

import torch


def derive_seed(*parts: object) -> int:
    """Return a 63-bit seed from the ``repr``-free string form of ``parts``.

    >>> derive_seed("cadp", "ar_sgd", "homogeneous-4", 0, "rank", 3) == derive_seed(
    ...     "cadp", "ar_sgd", "homogeneous-4", 0, "rank", 3)
    True
    """
    text = "\x1f".join(str(p) for p in parts)
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


def generator(*parts: object) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with :func:`derive_seed` of ``parts``."""
    g = torch.Generator()
    g.manual_seed(derive_seed(*parts))
    return g
