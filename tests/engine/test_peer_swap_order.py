"""The distributed engine posts a swap's receive before its send (distrepro/engine/multiprocess/peer.py).

Why it matters: on gloo, a swap posted send first takes turns (2·S/B measured through shaped links), posted
receive first it runs both directions at once (S/B), which is what the emulator charges on either backend."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist

from distrepro.engine.multiprocess import peer


class _Posted(Exception):
    pass


@pytest.fixture
def posted(monkeypatch: pytest.MonkeyPatch) -> list[list[object]]:
    """What each ``batch_isend_irecv`` was given; the call then stops the operation."""
    calls: list[list[object]] = []

    def record(ops: list[object]) -> list[object]:
        calls.append([op.op for op in ops])  # type: ignore[attr-defined]
        raise _Posted

    monkeypatch.setattr(peer.dist, "P2POp", lambda op, tensor, peer, group=None: SimpleNamespace(op=op))
    monkeypatch.setattr(peer.dist, "batch_isend_irecv", record)
    return calls


def test_the_gossip_swap_and_the_exchange_post_their_receive_first(posted: list[list[object]]) -> None:
    ops = SimpleNamespace(
        rank=0,
        world_size=2,
        clock=SimpleNamespace(t=0.0),
        gossip_group=None,
        _world=SimpleNamespace(handle=None),
        _to_wire=lambda t: t,
    )
    with pytest.raises(_Posted):
        peer.PeerOps._swap(ops, 1, torch.ones(4))  # type: ignore[arg-type]
    with pytest.raises(_Posted):
        peer.PeerOps.exchange(ops, 1, torch.ones(4))  # type: ignore[arg-type]
    assert posted == [[dist.irecv, dist.isend], [dist.irecv, dist.isend]]
