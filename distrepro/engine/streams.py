"""Per-worker data streams: endless, reshuffled, deterministic.

A worker in a budgeted run never "finishes an epoch" on its own terms: the harness stops it on a
time or sample budget, and a heterogeneity-aware method may change its shard or batch size at
every epoch boundary. So a worker's data is an endless stream over its index set: every local
pass is a fresh permutation drawn from ``distrepro.seeding.generator(*seed_parts, "pass", k)``, a
batch that runs past the end of a pass continues into the next one (no short or dropped
batches), and the same seed parts always give the same batches.

There is no ``DataLoader``: the in-process engine runs many virtual workers in one process
(on 2 CPU cores a plain loop over the replicas is as fast as anything), where worker processes
per stream would cost more than they save. In-memory datasets (``DatasetBundle.train_tensors``)
are gathered with one tensor index per batch; other datasets are read item by item and stacked.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from distrepro.api.method import Batch
from distrepro.data.loading import DatasetBundle
from distrepro.seeding import generator


def _gather(bundle: DatasetBundle, split: str, idx: torch.Tensor) -> Batch:
    """The samples ``idx`` of ``split`` as one batch (fast path for in-memory tensors)."""
    tensors = bundle.tensors(split)
    if tensors is not None:
        inputs, targets = tensors
        return Batch(inputs.index_select(0, idx), targets.index_select(0, idx))
    dataset = bundle.split(split)
    items = [dataset[i] for i in idx.tolist()]
    if not items:
        c, h, w = bundle.input_shape
        return Batch(torch.empty(0, c, h, w), torch.empty(0, dtype=torch.int64))
    inputs = torch.stack([torch.as_tensor(x) for x, _ in items])
    targets = torch.tensor([int(y) for _, y in items], dtype=torch.int64)
    return Batch(inputs, targets)


class WorkerStream:
    """An endless stream of batches of ``batch_size`` samples drawn from ``indices`` of a split.

    ``seed_parts`` identify the stream (run, rank, ...); pass ``k`` of the stream (counted from 0
    over the stream's whole life, also across :meth:`set_indices`) is shuffled with
    ``generator(*seed_parts, "pass", k)``.
    """

    def __init__(
        self,
        bundle: DatasetBundle,
        indices: torch.Tensor,
        batch_size: int,
        seed_parts: tuple[object, ...],
        split: str = "train",
    ) -> None:
        self.bundle = bundle
        self.split = split
        self.seed_parts = tuple(seed_parts)
        self._size = bundle.split_size(split)  # also validates ``split``
        self._indices = torch.empty(0, dtype=torch.int64)
        self._order: torch.Tensor | None = None  # permutation of the current pass, None = start one
        self._pos = 0
        self._passes = 0  # passes started so far; the next pass is number ``self._passes``
        self._batch_size = 0
        self.set_indices(indices)
        self.set_batch_size(batch_size)

    # ------------------------------------------------------------------ configuration
    @property
    def batch_size(self) -> int:
        """Samples per :meth:`next_batch`."""
        return self._batch_size

    @property
    def indices(self) -> torch.Tensor:
        """This worker's index set (a copy is not made; do not modify it)."""
        return self._indices

    @property
    def passes_started(self) -> int:
        """How many local passes have been started (the current one included)."""
        return self._passes

    def set_batch_size(self, batch_size: int) -> None:
        """Change the batch size from the next batch on; the position in the pass is kept."""
        if isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size < 0:
            raise ValueError(f"batch_size must be a non-negative integer, got {batch_size!r}")
        self._batch_size = int(batch_size)

    def set_indices(self, indices: torch.Tensor) -> None:
        """Replace the index set (re-allocation at an epoch boundary); the next batch starts a new pass."""
        idx = torch.as_tensor(indices)
        bad_dtype = idx.dtype == torch.bool or idx.is_floating_point() or idx.is_complex()
        if idx.dim() != 1 or (idx.numel() > 0 and bad_dtype):
            raise ValueError(f"indices must be a 1-D integer tensor, got {tuple(idx.shape)} {idx.dtype}")
        idx = idx.to(device="cpu", dtype=torch.int64)
        if idx.numel() > 0 and (int(idx.min()) < 0 or int(idx.max()) >= self._size):
            raise ValueError(
                f"indices out of range for the {self.split} split of '{self.bundle.name}' "
                f"({self._size} samples): min {int(idx.min())}, max {int(idx.max())}"
            )
        self._indices = idx.clone()
        self._order = None
        self._pos = 0

    # ------------------------------------------------------------------ drawing
    def state_dict(self) -> dict[str, object]:
        """Where the stream is, so a resumed run draws exactly the batches it would have drawn."""
        return {
            "indices": self._indices.clone(),
            "order": None if self._order is None else self._order.clone(),
            "pos": self._pos,
            "passes": self._passes,
            "batch_size": self._batch_size,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._indices = state["indices"].clone()
        order = state["order"]
        self._order = None if order is None else order.clone()
        self._pos = int(state["pos"])
        self._passes = int(state["passes"])
        self._batch_size = int(state["batch_size"])

    def _start_pass(self) -> torch.Tensor:
        gen = generator(*self.seed_parts, "pass", self._passes)
        self._passes += 1
        order = self._indices[torch.randperm(self._indices.numel(), generator=gen)]
        self._order = order
        self._pos = 0
        return order

    def next_indices(self) -> torch.Tensor:
        """The dataset indices of the next batch (advances the stream like :meth:`next_batch`)."""
        if self._batch_size == 0:
            raise ValueError("next_batch() with batch_size 0: this worker was allocated no samples per step")
        if self._indices.numel() == 0:
            raise ValueError("next_batch() on an empty index set: this worker was allocated no data")
        chunks: list[torch.Tensor] = []
        need = self._batch_size
        while need > 0:
            order = self._order
            if order is None or self._pos >= order.numel():
                order = self._start_pass()
            take = min(need, order.numel() - self._pos)
            chunks.append(order[self._pos : self._pos + take])
            self._pos += take
            need -= take
        return chunks[0] if len(chunks) == 1 else torch.cat(chunks)

    def next_batch(self) -> Batch:
        """The next ``batch_size`` samples, wrapping into a freshly shuffled pass when needed."""
        return _gather(self.bundle, self.split, self.next_indices())

    def __iter__(self) -> Iterator[Batch]:
        while True:
            yield self.next_batch()


def iterate_eval(bundle: DatasetBundle, batch_size: int, split: str = "test") -> Iterator[Batch]:
    """Batches over all of ``split`` in dataset order (the last one may be short).

    On the fast path the batches are views into the bundle's tensors: read them, do not write.
    """
    if isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size < 1:
        raise ValueError(f"eval batch_size must be a positive integer, got {batch_size!r}")
    n = bundle.split_size(split)
    tensors = bundle.tensors(split)
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        if tensors is not None:
            yield Batch(tensors[0][start:stop], tensors[1][start:stop])
        else:
            yield _gather(bundle, split, torch.arange(start, stop))
