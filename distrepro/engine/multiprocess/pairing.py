"""Gossip pairing across processes: a coordinator on rank 0, talking through the c10d store.

As the A²CiD² reference orchestrator does (github.com/AdelNabli/ACiD @ 89393fd, ``p2p_sync.py``
``master_process``), a worker that wants to average announces itself; the coordinator pairs it
with a *waiting* neighbour that also lists it, or leaves it waiting. Pairing is central, so no
worker is ever in two pairs at once, and both members of a pair learn each other's rank, so every
send has its receive: no deadlock. A worker that finishes training says so, and the coordinator releases any
waiter whose neighbours have all finished (answer: no partner).

Messages are store keys: request ``n`` is ``pair/req/<n>`` (``n`` from an atomic counter), the
answer to rank ``r``'s ``k``-th request is ``pair/ans/<r>/<k>``. Every wait has a timeout, so a
dead rank fails the run instead of hanging it. The coordinator sees requests in real arrival
order (as a real system does); under time dilation that follows the virtual order.

For gossip agents (:mod:`distrepro.engine.multiprocess.agent`) a request may also name ``avoid``, the partners of
the worker's current gradient interval: a pair forms only where neither side avoids the other, unless the
avoided one is the only neighbour left (the in-process hub's rule, README of ``methods/acid``: pairing).
Agents say when their worker is ``parked`` at its barrier; when every worker still training is parked
and waiting for a partner (nothing in flight), no pairing can come from elsewhere, so the coordinator
forgets the avoidances and pairs again, and if even that pairs nobody it tells one waiter to skip its
interval's quota (``SKIP``), as the in-process engine does when every worker waits.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

_DONE = -1
#: the answer to a waiter in a state where no pair can form: give up this interval's quota
SKIP = -2


class PairingClient:
    """A worker's side: ``request`` a partner, announce ``done``."""

    def __init__(self, store: Any, rank: int, timeout_s: float = 300.0) -> None:
        self.store, self.rank, self.timeout = store, rank, timedelta(seconds=timeout_s)
        self._k = 0
        self._done = False

    def _post(self, message: dict[str, Any]) -> None:
        n = self.store.add("pair/next", 1)
        self.store.set(f"pair/req/{n}", json.dumps(message))

    def request(self, neighbours: list[int], clock_s: float) -> tuple[int | None, float]:
        """Block until paired; returns (peer, the pairing's virtual time) or (None, ``clock_s``)."""
        return self.answer(self.ask(neighbours, clock_s), clock_s)

    def ask(self, neighbours: list[int], clock_s: float, avoid: list[int] | None = None) -> int:
        """Announce the request without waiting (a non-blocking ``pair``); returns its number for ``answer``.
        ``avoid``: neighbours not to pair with while another is left (a gossip agent's interval partners)."""
        k = self._k
        self._k += 1
        message: dict[str, Any] = {"rank": self.rank, "k": k, "neighbours": neighbours, "t": clock_s}
        if avoid:
            message["avoid"] = sorted(avoid)
        self._post(message)
        return k

    def answer(self, k: int, clock_s: float) -> tuple[int | None, float]:
        """Block until request ``k`` (asked at ``clock_s``) is answered: (peer, pairing time) or (None, ``clock_s``)."""
        key = f"pair/ans/{self.rank}/{k}"
        self.store.wait([key], self.timeout)
        answer = json.loads(self.store.get(key))
        peer = int(answer["peer"])
        if peer == SKIP:
            return SKIP, clock_s
        return (None, clock_s) if peer == _DONE else (peer, float(answer["t"]))

    @property
    def said_done(self) -> bool:
        """Whether :meth:`done` was posted: the coordinator may have stopped, so no request may follow."""
        return self._done

    def parked(self, waiting: bool) -> None:
        """This rank's worker waits at its gossip barrier (True) or computes again (False)."""
        self._post({"rank": self.rank, "parked": waiting})

    def done(self) -> None:
        """This rank pairs no more (its pending request, if any, is answered "no partner"). Once."""
        if not self._done:
            self._done = True
            self._post({"rank": self.rank, "done": True})


class PairingCoordinator:
    """Runs on rank 0 in a thread until every rank has said it is done."""

    def __init__(self, store: Any, world_size: int, timeout_s: float = 300.0) -> None:
        self.store, self.world_size, self.timeout = store, world_size, timedelta(seconds=timeout_s)
        self.waiting: dict[int, dict[str, Any]] = {}
        self.finished: set[int] = set()
        self.parked: set[int] = set()  # ranks whose worker waits at its gossip barrier
        self.error: BaseException | None = None
        self.pairs = 0
        self._thread = threading.Thread(target=self._run, name="distrepro-pairing", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout_s: float | None = None) -> None:
        self._thread.join(timeout_s)
        if self.error is not None:
            raise RuntimeError(f"pairing coordinator failed: {self.error}") from self.error

    def _answer(self, req: dict[str, Any], peer: int, t: float) -> None:
        self.store.set(f"pair/ans/{req['rank']}/{req['k']}", json.dumps({"peer": peer, "t": t}))

    def _release_stuck(self) -> None:
        for r, req in list(self.waiting.items()):
            if all(j in self.finished for j in req["neighbours"]):
                del self.waiting[r]
                self._answer(req, _DONE, req["t"])

    def _allowed(self, req: dict[str, Any], j: int) -> bool:
        """``req``'s rank may pair with ``j``: not avoided, or every other neighbour avoided or finished."""
        avoid = req.get("avoid", ())
        return j not in avoid or all(k in avoid or k in self.finished for k in req["neighbours"])

    def handle(self, msg: dict[str, Any]) -> None:
        """Apply one message (public for tests: the matching rule without threads)."""
        rank = int(msg["rank"])
        if msg.get("done"):
            self.finished.add(rank)
            self.parked.discard(rank)
            mine = self.waiting.pop(rank, None)
            if mine is not None:  # a pending request of a rank that stops: no partner
                self._answer(mine, _DONE, mine["t"])
            self._release_stuck()
            self._match_waiting()  # an avoidance may have lapsed: the avoided one is now the last neighbour
        elif "parked" in msg:
            (self.parked.add if msg["parked"] else self.parked.discard)(rank)
        elif rank in self.finished:
            self._answer(msg, _DONE, float(msg["t"]))
            return
        elif self._match(msg) is None:
            if all(j in self.finished for j in msg["neighbours"]):
                self._answer(msg, _DONE, float(msg["t"]))
                return
            self.waiting[rank] = msg
        self._unstick()

    def _match(self, msg: dict[str, Any]) -> int | None:
        """Pair ``msg``'s rank with the first waiting neighbour, in its order, that lists it; the partner or None."""
        rank = int(msg["rank"])
        for j in msg["neighbours"]:
            other = self.waiting.get(j)
            if (
                other is not None
                and rank in other["neighbours"]
                and self._allowed(msg, j)
                and self._allowed(other, rank)
            ):
                del self.waiting[j]
                t = max(float(msg["t"]), float(other["t"]))
                self._answer(msg, j, t)
                self._answer(other, rank, t)
                self.pairs += 1
                return j
        return None

    def _match_waiting(self) -> bool:
        """Match the waiting requests among themselves again, in rank order; True if a pair formed."""
        requests = [self.waiting.pop(r) for r in sorted(self.waiting)]
        paired: set[int] = set()
        for req in requests:
            rank = int(req["rank"])
            if rank in paired:
                continue
            partner = self._match(req)
            if partner is None:
                self.waiting[rank] = req
            else:
                paired |= {rank, partner}
        return bool(paired)

    def _unstick(self) -> None:
        """Every rank still training is parked and waiting, so no request can come: drop the avoidances
        and match again; if still nobody pairs, the lowest waiter skips its interval's quota."""
        live = [r for r in range(self.world_size) if r not in self.finished]
        if not live or any(r not in self.parked or r not in self.waiting for r in live):
            return
        for req in self.waiting.values():
            req.pop("avoid", None)
        if not self._match_waiting() and self.waiting:
            rank = min(self.waiting)
            req = self.waiting.pop(rank)
            self._answer(req, SKIP, float(req["t"]))

    def _run(self) -> None:
        try:
            n = 1
            while len(self.finished) < self.world_size:
                key = f"pair/req/{n}"
                self.store.wait([key], self.timeout)
                self.handle(json.loads(self.store.get(key)))
                n += 1
        except BaseException as exc:  # reported by join()
            self.error = exc
