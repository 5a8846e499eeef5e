"""One writer per campaign: a lock kept on the campaign's run in the MLflow store.

Two ``distrepro run --resume`` of one campaign at once each planned the seeds from what the store said: the second
saw the first's live seed run RUNNING without a checkpoint, declared it dead, trained the seed again, and the
campaign ended with two FINISHED runs of one seed. A lock file would not help: machines sharing a tracking server
share no folder. So the lock lives where the campaign does, on its run, and holds wherever the store is reached from.

**Taking it (compare-and-set).** MLflow lets a param be logged once and never changed: the SQL store (sqlite, and
every server backed by a database) inserts a param under the primary key (run, key), so of two processes logging
``distrepro.lock.N`` on one run, exactly one insert commits and the other gets ``INVALID_PARAMETER_VALUE``
(mlflow ``SqlAlchemyStore.log_param``). Generation ``N`` of the lock is that param; its value names the holder
(host, pid, start). To take the lock a process reads the newest generation; if it is free (released, or never
taken) or stale, it logs generation ``N + 1``: winning that insert is owning the lock, and a loser reads again and
finds a live holder. (MLflow's file store checks and writes a param in two steps: there the lock narrows the race
but cannot close it.)

**Keeping it.** The holder refreshes the tag ``distrepro.lock`` (its generation, a heartbeat time) every
:data:`HEARTBEAT_S` seconds from a daemon thread, and marks it released when the campaign's run closes.

**Stale.** A lock is taken over, with a line saying so, when its heartbeat is older than :data:`STALE_S` (the
holder's machine went away, or its store did; machines sharing a store are assumed to agree on the time within that
much), or at once when its holder ran on this host and its process is gone (a ``kill -9``, an out-of-memory kill).
A live one refuses the second process with :class:`CampaignLocked`, naming the holder and what to do.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from distrepro.errors import DistreproError

#: the tag the holder refreshes: ``{"generation": N, "heartbeat": unix seconds, "released": bool}``
LOCK_TAG = "distrepro.lock"
#: the param of generation N is ``distrepro.lock.N``: its value names the holder (written once: the compare-and-set)
LOCK_PARAM = re.compile(r"distrepro\.lock\.(\d+)")
#: seconds between heartbeats
HEARTBEAT_S = 30.0
#: a lock whose heartbeat is older than this is stale (ten missed heartbeats)
STALE_S = 300.0


class CampaignLocked(DistreproError):
    """Another live process writes to this campaign: a second writer would train its seeds twice."""


@dataclass(frozen=True)
class Holder:
    """Who holds generation ``generation`` of a campaign's lock, and its latest heartbeat (unix seconds)."""

    generation: int
    host: str
    pid: int
    started: float
    heartbeat: float
    released: bool

    def describe(self) -> str:
        return f"pid {self.pid} on host {self.host} (started {_clock(self.started)})"


def _clock(unix: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix))


def read_holder(params: dict[str, str], tags: dict[str, str]) -> Holder | None:
    """The newest generation of the lock from a run's params and tags; None if the lock was never taken."""
    generations = [int(m.group(1)) for key in params if (m := LOCK_PARAM.fullmatch(key))]
    if not generations:
        return None
    generation = max(generations)
    try:
        owner = json.loads(params[f"distrepro.lock.{generation}"])
        host, pid, started = str(owner["host"]), int(owner["pid"]), float(owner["started"])
    except (ValueError, KeyError, TypeError):  # not ours: treated as a holder long gone
        host, pid, started = "?", 0, 0.0
    heartbeat, released = started, False
    try:
        beat = json.loads(tags.get(LOCK_TAG, "{}"))
        if int(beat.get("generation", -1)) == generation:
            heartbeat, released = float(beat.get("heartbeat", started)), bool(beat.get("released", False))
    except (ValueError, TypeError, AttributeError):
        pass
    return Holder(generation, host, pid, started, heartbeat, released)


def is_lock_param(key: str) -> bool:
    """Whether ``key`` is a generation of the lock (not a field of the campaign's config)."""
    return LOCK_PARAM.fullmatch(key) is not None


def stale_reason(holder: Holder, now: float | None = None) -> str | None:
    """Why ``holder``'s lock may be taken over (its process is gone, or its heartbeat stopped), or None if it is
    live."""
    now = time.time() if now is None else now
    if holder.host == socket.gethostname() and not _alive(holder.pid):
        return f"its process {holder.pid} on this host is gone"
    age = now - holder.heartbeat
    if age > STALE_S:
        return f"its last heartbeat was {age:.0f} s ago, over the {STALE_S:.0f} s limit"
    return None


def refusal(what: str, run_id: str, holder: Holder) -> str:
    """The one line that refuses a second writer of ``run_id``: who holds it, and how to go on."""
    age = max(0.0, time.time() - holder.heartbeat)
    return (
        f"{what} {run_id} is being written by {holder.describe()}, heartbeat {age:.0f} s ago: a second writer "
        "would train its seeds twice; wait for that process to end (--resume again if it stops short), or stop it "
        f"(kill {holder.pid} on {holder.host}) and --resume: a lock whose process is gone is taken over at once on "
        f"that host, elsewhere {STALE_S:.0f} s after its last heartbeat"
    )


def check_free(what: str, run_id: str, params: dict[str, str], tags: dict[str, str]) -> None:
    """Refuse at once (:class:`CampaignLocked`) a run whose lock a live process holds, from what was read of it:
    the early check of a command, before it loads torch; :meth:`CampaignLock.acquire` decides for good."""
    holder = read_holder(params, tags)
    if holder is not None and not holder.released and stale_reason(holder) is None:
        raise CampaignLocked(refusal(what, run_id, holder))


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


class CampaignLock:
    """The lock of campaign run ``run_id`` for this process: :meth:`acquire`, then :meth:`release` when the run
    closes. ``client`` (``make_client``) should be the lock's own: a fault its heartbeat thread meets must not mark
    the campaign's client unavailable (:class:`~distrepro.tracking.storeguard.GuardedClient` fails every call after
    one)."""

    def __init__(self, client: Any, run_id: str, what: str = "campaign run") -> None:
        self.client = client
        self.run_id = run_id
        self.what = what
        self.generation: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def held(self) -> bool:
        return self.generation is not None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`CampaignLocked` naming the live holder. A stale lock is taken over with a
        line on stderr."""
        from mlflow.exceptions import MlflowException

        for _ in range(5):  # each lost race means a new holder is now live: the next read refuses
            run = self.client.get_run(self.run_id)
            holder = read_holder(dict(run.data.params), dict(run.data.tags))
            reason = None
            if holder is not None and not holder.released:
                reason = stale_reason(holder)
                if reason is None:
                    raise CampaignLocked(self._refusal(holder))
            generation = holder.generation + 1 if holder is not None else 1
            mine = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "started": round(time.time(), 3)})
            try:
                self.client.log_param(self.run_id, f"distrepro.lock.{generation}", mine)
            except MlflowException as exc:
                if exc.error_code != "INVALID_PARAMETER_VALUE":
                    raise
                continue  # another process took this generation first
            self.generation = generation
            if holder is not None and reason is not None:
                print(
                    f"distrepro: {self.what} {self.run_id}: taking over its lock from {holder.describe()}: {reason}",
                    file=sys.stderr,
                    flush=True,
                )
            self._beat()
            self._thread = threading.Thread(target=self._heartbeats, name="distrepro-campaign-lock", daemon=True)
            self._thread.start()
            return
        raise CampaignLocked(f"{self.what} {self.run_id}: its lock keeps changing hands; try again")

    def _refusal(self, holder: Holder) -> str:
        return refusal(self.what, self.run_id, holder)

    def _beat(self, released: bool = False) -> None:
        assert self.generation is not None
        beat = {"generation": self.generation, "heartbeat": round(time.time(), 3), "released": released}
        self.client.set_tag(self.run_id, LOCK_TAG, json.dumps(beat))

    def _still_mine(self) -> bool:
        run = self.client.get_run(self.run_id)
        holder = read_holder(dict(run.data.params), dict(run.data.tags))
        return holder is not None and holder.generation == self.generation

    def _heartbeats(self) -> None:
        """Refresh the heartbeat until released; a lock taken over (this process was stopped past the limit) is said
        once, and no longer refreshed."""
        while not self._stop.wait(HEARTBEAT_S):
            try:
                if not self._still_mine():
                    print(
                        f"distrepro: warning: {self.what} {self.run_id}: its lock was taken over by another process "
                        f"(this one's heartbeat had stopped for over {STALE_S:.0f} s); two processes now write to it: "
                        "stop one",
                        file=sys.stderr,
                        flush=True,
                    )
                    self.generation = None
                    return
                self._beat()
            except Exception:  # the store went away: the campaign says so itself; the heartbeat just stops
                return

    def release(self) -> None:
        """Mark the lock released (if this process still holds it) and stop the heartbeat. Idempotent; a store that
        cannot be written leaves the lock to go stale."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self.generation is None:
            return
        try:
            if self._still_mine():
                self._beat(released=True)
        except Exception:  # cleanup on the way out of a campaign (often after a store fault): never the error shown
            pass
        finally:
            self.generation = None


def release_abandoned(client: Any, run_id: str, pid: int) -> None:
    """Mark released the lock that process ``pid`` of this host held on ``run_id`` and left behind when it ended
    without finishing (its watcher calls this; a lock another process has taken since is left alone)."""
    run = client.get_run(run_id)
    holder = read_holder(dict(run.data.params), dict(run.data.tags))
    if holder is None or holder.released or holder.host != socket.gethostname() or holder.pid != pid:
        return
    beat = {"generation": holder.generation, "heartbeat": round(time.time(), 3), "released": True}
    client.set_tag(run_id, LOCK_TAG, json.dumps(beat))
