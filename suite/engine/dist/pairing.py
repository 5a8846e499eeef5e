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
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

_DONE = -1


class PairingClient:
    """A worker's side: ``request`` a partner, announce ``done``."""

    def __init__(self, store: Any, rank: int, timeout_s: float = 300.0) -> None:
        self.store, self.rank, self.timeout = store, rank, timedelta(seconds=timeout_s)
        self._k = 0

    def _post(self, message: dict[str, Any]) -> None:
        n = self.store.add("pair/next", 1)
        self.store.set(f"pair/req/{n}", json.dumps(message))

    def request(self, neighbours: list[int], clock_s: float) -> tuple[int | None, float]:
        """Block until paired; returns (peer, the pairing's virtual time) or (None, ``clock_s``)."""
        return self.answer(self.ask(neighbours, clock_s), clock_s)

    def ask(self, neighbours: list[int], clock_s: float) -> int:
        """Announce the request without waiting (a non-blocking ``pair``); returns its number for ``answer``."""
        k = self._k
        self._k += 1
        self._post({"rank": self.rank, "k": k, "neighbours": neighbours, "t": clock_s})
        return k

    def answer(self, k: int, clock_s: float) -> tuple[int | None, float]:
        """Block until request ``k`` (asked at ``clock_s``) is answered: (peer, pairing time) or (None, ``clock_s``)."""
        key = f"pair/ans/{self.rank}/{k}"
        self.store.wait([key], self.timeout)
        answer = json.loads(self.store.get(key))
        peer = int(answer["peer"])
        return (None, clock_s) if peer == _DONE else (peer, float(answer["t"]))

    def done(self) -> None:
        self._post({"rank": self.rank, "done": True})


class PairingCoordinator:
    """Runs on rank 0 in a thread until every rank has said it is done."""

    def __init__(self, store: Any, world_size: int, timeout_s: float = 300.0) -> None:
        self.store, self.world_size, self.timeout = store, world_size, timedelta(seconds=timeout_s)
        self.waiting: dict[int, dict[str, Any]] = {}
        self.finished: set[int] = set()
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

    def handle(self, msg: dict[str, Any]) -> None:
        """Apply one message (public for tests: the matching rule without threads)."""
        if msg.get("done"):
            self.finished.add(int(msg["rank"]))
            self._release_stuck()
            return
        for j in msg["neighbours"]:
            other = self.waiting.get(j)
            if other is not None and msg["rank"] in other["neighbours"]:
                del self.waiting[j]
                t = max(float(msg["t"]), float(other["t"]))
                self._answer(msg, j, t)
                self._answer(other, int(msg["rank"]), t)
                self.pairs += 1
                return
        if all(j in self.finished for j in msg["neighbours"]):
            self._answer(msg, _DONE, float(msg["t"]))
            return
        self.waiting[int(msg["rank"])] = msg

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
