"""The distributed engine's gossip agent (:mod:`distrepro.api.gossip`): a thread that pairs and exchanges while the
worker computes, as the A²CiD² reference's separate gossip process does.

Each rank that asks for an agent gets one thread. While the interval's quota owes an averaging it asks the
pairing coordinator (:mod:`distrepro.engine.multiprocess.pairing`) for a ready neighbour and swaps the parameter
vector with it over a process group of its own, really concurrently with the worker's forward and backward passes
(gloo's send and receive run on this thread; the worker's thread keeps computing). The worker meets its agent at
``sync`` (after its gradient) and at the barrier after each step, exactly as with the in-process agent.

What differs from the in-process agent, and why:

* **The worker's thread applies every averaging.** The agent never writes the parameters: autograd may be
  reading them for the backward pass in flight, and the reference's Hogwild writes (another process, shared
  memory) have no safe equivalent inside one process. An averaging that ended is applied at the worker's next
  ``sync`` (if it ended before the worker's virtual now) or while the worker waits at the barrier. The agent
  pairs again only once its last averaging is applied, so each exchange sends the x the previous one left (the
  reference's serial gossip): a second averaging in one gradient interval starts at the worker's next sync
  point instead of during the computation.
* **The vector sent** is the one the worker last published: at start, at ``sync``, at the barrier (after the
  step) and after each averaging applied there, i.e. x as it is between the worker's writes.
* **Virtual times** follow the in-process rules: an agent is ready at its start, at the end of its previous
  exchange, or when the worker applied it; a pair starts at the later of the two ready times (the coordinator's
  answer) and ends after the exchange's modelled cost, charged as if the flow were alone. Which pairs form
  follows real arrival order at the coordinator (as in the reference), so runs are not bitwise repeatable; with
  throttling real order follows virtual order.

Accounting is the in-process agent's: exchanges during computation cost the worker nothing; at the barrier,
time covered by its own exchange is communication, the rest idle (:meth:`VirtualClock.wait_through`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import torch

from distrepro.api.gossip import GossipEndpoint
from distrepro.engine.clock import VirtualClock
from distrepro.engine.multiprocess.pairing import SKIP, PairingClient
from distrepro.errors import CommError

#: (peer, vector) → the peer's vector, moved for real (blocking, on the agent's thread)
Swap = Callable[[int, torch.Tensor], torch.Tensor]
#: (peer, vector) → modelled seconds of the exchange (and its bytes counted by the comm)
Charge = Callable[[int, torch.Tensor], float]


class DistAgent:
    """One rank's gossip agent (:class:`distrepro.api.gossip.GossipAgent`); worker-side calls come from the worker's
    thread, everything else runs on the agent's own thread."""

    def __init__(
        self,
        rank: int,
        neighbors: Sequence[int],
        endpoint: GossipEndpoint,
        clock: VirtualClock,
        pairing: PairingClient,
        swap: Swap,
        charge: Charge,
        timeout_s: float,
    ) -> None:
        self.rank, self.endpoint, self.clock, self.pairing = rank, endpoint, clock, pairing
        self.neighbors = tuple(dict.fromkeys(int(j) for j in neighbors))
        self.swap, self.charge, self.timeout_s = swap, charge, timeout_s
        self._cv = threading.Condition()
        self.owed = 0.0
        self.started = self.closing = False
        self.stepping = False  # between sync and barrier: the worker writes x
        self.asking = False  # a request is at the coordinator, unanswered
        self.active = True  # False once no neighbour is left to pair with
        self.ready_at = 0.0  # virtual time from which the agent may pair again
        self.received: list[tuple[float, int, torch.Tensor]] = []  # (end, peer, vector) not yet applied
        self.spans: list[tuple[float, float]] = []  # own exchanges of this interval (start, end)
        self.partners: set[int] = set()  # this interval's partners
        self.done = 0  # averagings completed in this interval
        self.outbox: tuple[torch.Tensor, list[int]] | None = None  # (vector to send, candidate order)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"distrepro-gossip-{rank}", daemon=True)

    # ------------------------------------------------------------------ worker side
    def start(self, quota: float) -> None:
        with self._cv:
            if self.started:
                raise CommError(f"rank {self.rank}: gossip agent started twice")
            self.started = True
            self.owed += quota
            self.ready_at = self.clock.t
            self._publish()
        self._thread.start()

    def sync(self) -> None:
        with self._cv:
            self._check()
            self.stepping = True  # until the barrier publishes the stepped x, the agent does not pair
            self._apply(until=self.clock.t)

    def barrier(self, next_quota: float) -> int:
        parked = False
        deadline = time.monotonic() + self.timeout_s
        with self._cv:
            self._apply()
            self._publish()  # x after the step: what the agent sends from now on
            self.stepping = False
            self._cv.notify_all()
            while not self._quota_met():
                if not parked:
                    self.pairing.parked(True)
                    parked = True
                self._cv.wait(timeout=1.0)
                self._check()
                if self._apply():
                    self._publish()
                    self._cv.notify_all()
                    deadline = time.monotonic() + self.timeout_s
                elif time.monotonic() > deadline:
                    raise CommError(
                        f"rank {self.rank}: gossip barrier: no averaging completed in {self.timeout_s:g} s "
                        "(dist.timeout_s); a neighbour may have died"
                    )
            if parked:  # said before the next quota lets the agent ask again, so the coordinator sees it first
                self.pairing.parked(False)
            t = max([self.clock.t] + [end for _, end in self.spans])
            self.clock.wait_through(self.spans, t)
            count, self.done, self.spans = self.done, 0, []
            self.partners.clear()
            self.owed += next_quota
            self.ready_at = max(self.ready_at, t)
            self._cv.notify_all()
        return count

    def close(self) -> None:
        """Stop pairing. An agent waiting for a partner is cancelled (the coordinator answers "no partner"); one
        that owes an averaging and is not waiting makes a last request first, so that a neighbour already waiting
        pairs with it as at the same instant in the in-process engine; a pair formed is completed and applied."""
        with self._cv:  # requests and "done" are posted under the lock: none follows "done" (nobody would answer)
            self.closing = True
            if self.asking or not self.started:
                self.pairing.done()
            self._cv.notify_all()
        if not self.started:
            return
        self._thread.join(self.timeout_s)
        if self._thread.is_alive():
            raise CommError(f"rank {self.rank}: the gossip agent did not stop within {self.timeout_s:g} s")
        with self._cv:
            self._check()
            self._apply()
            for start, end in self.spans:
                if end > self.clock.t:
                    self.clock.finish_op(start, end)

    # ------------------------------------------------------------------ shared state (under the lock)
    def _quota_met(self) -> bool:
        return self.owed < 1 or not self.active

    def _check(self) -> None:
        if self.error is not None:
            raise CommError(f"rank {self.rank}: gossip agent failed: {self.error}") from self.error

    def _publish(self) -> None:
        self.outbox = (self.endpoint.snapshot().detach().clone(), list(self.endpoint.candidates()))

    def _apply(self, until: float | None = None) -> bool:
        """Average the peers' vectors of the exchanges that ended (by ``until``), in end-time order."""
        due = [r for r in self.received if until is None or r[0] <= until]
        if not due:
            return False
        self.received = [r for r in self.received if until is not None and r[0] > until]
        for end, peer, vector in sorted(due, key=lambda r: r[0]):
            self.endpoint.receive(end, peer, vector)
        self.ready_at = max(self.ready_at, self.clock.t)  # the agent could not go on before this
        return True

    def _may_pair(self) -> bool:
        return self.started and self.active and self.owed >= 1 and not self.received and not self.stepping

    # ------------------------------------------------------------------ the agent's thread
    def _run(self) -> None:
        try:
            while self._round():
                pass
        except BaseException as exc:  # reported on the worker's thread
            with self._cv:
                self.error = exc
                self._cv.notify_all()
        finally:
            with self._cv:
                self.pairing.done()

    def _round(self) -> bool:
        """Pair once and exchange; False when the agent stops."""
        with self._cv:
            self._cv.wait_for(lambda: self.closing or self._may_pair())
            final = self.closing
            if self.pairing.said_done or (final and not (self.active and self.owed >= 1)):
                return False
            assert self.outbox is not None
            t = self.ready_at
            k = self.pairing.ask(self.outbox[1], t, [j for j in self.partners if j in self.neighbors])
            self.asking = True
            if final:
                self.pairing.done()  # only a neighbour already waiting can still pair with this request
        peer, start = self.pairing.answer(k, t)
        with self._cv:
            self.asking = False
            if peer is None or peer == SKIP:  # no neighbour left / nobody can pair: drop the quota
                self.owed = 0.0
                self.active = self.active and peer == SKIP
                self._cv.notify_all()
                return peer is not None and not final
            assert self.outbox is not None
            mine = self.outbox[0]
        theirs = self.swap(peer, mine)
        end = start + self.charge(peer, mine)
        with self._cv:
            self.received.append((end, peer, theirs))
            self.spans.append((start, end))
            self.owed -= 1
            self.done += 1
            self.partners.add(peer)
            self.ready_at = max(self.ready_at, end)
            self._cv.notify_all()
        return not final
