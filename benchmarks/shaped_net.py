"""Real, rate-limited links between processes on one Linux machine: network namespaces on a bridge, shaped by ``tc``.

Each emulated *node* is a network namespace with one veth pair to a private bridge; its NIC rate is an ``htb``
class on both ends of the pair (the namespace's end shapes what the node sends, the bridge's end what it
receives), so a node's traffic in each direction shares one capacity as the emulator's ``("tx", node)`` /
``("rx", node)`` resources do. Ranks placed in the same namespace talk over its loopback path, unshaped: that
is the intra-node link. This is how Mininet builds emulated networks (Lantz, Heller & McKeown, "A Network in a
Laptop", HotNets 2010); ``htb`` is used rather than ``tbf`` because a veth hands ``tc`` segmentation-offload
super-packets larger than a small ``tbf`` bucket.

Latency cannot always be added: ``netem`` is a separate kernel module that some kernels lack. :func:`netem_available`
probes for it and the benchmark reports which was used. A CPU cap per rank uses the cgroup v1 ``cpu`` controller
(``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``) when it is mounted.

Everything made here is removed in :meth:`ShapedNetwork.close` (a ``with`` block does it in a ``finally``): the
namespaces (which takes their veth ends and the pairs), the bridge, the cgroups. Names carry the creating process id
so two benchmarks cannot collide, and addresses come from a private range (10.213.0.0/16) on the bridge made here.
Needs root; :func:`unavailable_reason` says in one line why namespaces cannot be made where they cannot.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_CPU = Path("/sys/fs/cgroup/cpu")
#: one node's interface inside its namespace, as gloo is told to use it (GLOO_SOCKET_IFNAME)
NODE_IFNAME = "eth0"
#: most namespaces (nodes) one network may have: bounds every loop that makes them
MAX_NODES = 8


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=30)


def _tc(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tc", *args], check=check, capture_output=True, text=True, timeout=30)


def unavailable_reason() -> str | None:
    """None where namespaces, veth pairs and htb can be made here; else why not, in one line."""
    if os.name != "posix" or not Path("/proc/self/ns/net").exists():
        return "not Linux: network namespaces are a Linux feature"
    if os.geteuid() != 0:
        return "needs root (ip netns add, tc)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"'{tool}' (iproute2) is not installed"
    probe = f"drprobe{os.getpid() % 100000}"
    try:
        made = _ip("netns", "add", probe, check=False)
        if made.returncode != 0:
            return f"cannot make a network namespace: {made.stderr.strip() or made.returncode}"
    finally:
        _ip("netns", "delete", probe, check=False)
    return None


def netem_available() -> bool:
    """Whether ``tc qdisc ... netem`` works on this kernel (probed on a dummy link inside a throwaway namespace)."""
    probe = f"drnetem{os.getpid() % 100000}"
    try:
        if _ip("netns", "add", probe, check=False).returncode != 0:
            return False
        _ip("-n", probe, "link", "set", "lo", "up", check=False)
        added = subprocess.run(
            ["ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return added.returncode == 0
    finally:
        _ip("netns", "delete", probe, check=False)


def cgroup_cpu_available() -> bool:
    """Whether the cgroup v1 cpu controller is mounted and writable (per-rank CPU quotas)."""
    return (CGROUP_CPU / "cpu.cfs_quota_us").is_file() and os.access(CGROUP_CPU, os.W_OK)


@dataclass
class ShapedNetwork:
    """``n_nodes`` namespaces on one bridge, each node's NIC limited to ``rate_mbit`` Mbit/s in each direction.

    ``delay_ms``: one-way delay added with netem on the node's outgoing side (needs netem; refused otherwise).
    ``cpu_quota``: cores per rank (e.g. 0.5) through cgroup v1, or None for no cap.
    """

    n_nodes: int
    rate_mbit: float | None
    delay_ms: float = 0.0
    cpu_quota: float | None = None
    tag: str = field(default_factory=lambda: str(os.getpid() % 100000))
    namespaces: list[str] = field(default_factory=list, init=False)
    addresses: list[str] = field(default_factory=list, init=False)
    cgroups: list[Path] = field(default_factory=list, init=False)
    _host_ends: list[str] = field(default_factory=list, init=False)
    _bridge: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if not 1 <= self.n_nodes <= MAX_NODES:
            raise ValueError(f"n_nodes must be 1..{MAX_NODES}, got {self.n_nodes}")
        if self.rate_mbit is not None and self.rate_mbit <= 0:
            raise ValueError(f"rate_mbit must be positive, got {self.rate_mbit}")

    def __enter__(self) -> ShapedNetwork:
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _build(self) -> None:
        self._bridge = f"drb{self.tag}"
        _ip("link", "add", self._bridge, "type", "bridge")
        _ip("link", "set", self._bridge, "up")
        subnet = int(self.tag) % 250
        for i in range(self.n_nodes):
            ns, host_end, node_end = f"distrepro-{self.tag}-n{i}", f"drv{self.tag}h{i}", f"drv{self.tag}c{i}"
            _ip("netns", "add", ns)
            self.namespaces.append(ns)
            _ip("link", "add", host_end, "type", "veth", "peer", "name", node_end)
            self._host_ends.append(host_end)
            _ip("link", "set", host_end, "master", self._bridge)
            _ip("link", "set", host_end, "up")
            _ip("link", "set", node_end, "netns", ns)
            _ip("-n", ns, "link", "set", node_end, "name", NODE_IFNAME)
            address = f"10.213.{subnet}.{i + 1}"
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", NODE_IFNAME)
            _ip("-n", ns, "link", "set", NODE_IFNAME, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            self.addresses.append(address)
            if self.rate_mbit is not None:
                self._shape(None, host_end)  # what the node receives
                self._shape(ns, NODE_IFNAME)  # what the node sends
            if self.delay_ms > 0:
                self._delay(ns, NODE_IFNAME)

    def _shape(self, ns: str | None, dev: str) -> None:
        """An htb root with one class at the node's rate: every packet of the interface goes through it."""
        prefix = ["-n", ns] if ns else []
        rate = f"{self.rate_mbit}mbit"
        _tc(*prefix, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10")
        _tc(*prefix, "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate", rate, "ceil", rate)

    def _delay(self, ns: str, dev: str) -> None:
        parent = ["parent", "1:10"] if self.rate_mbit is not None else ["root"]
        done = _tc("-n", ns, "qdisc", "add", "dev", dev, *parent, "handle", "20:", "netem", "delay",
                   f"{self.delay_ms}ms", check=False)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"netem is not available on this kernel ({done.stderr.strip()}): cannot add delay")

    def cgroup_for(self, rank: int) -> Path | None:
        """A cgroup capping one rank at ``cpu_quota`` cores (made on first use), or None without a cap."""
        if self.cpu_quota is None:
            return None
        if not cgroup_cpu_available():
            raise RuntimeError(f"the cgroup v1 cpu controller is not mounted writable at {CGROUP_CPU}")
        path = CGROUP_CPU / f"distrepro-{self.tag}-r{rank}"
        if path not in self.cgroups:
            path.mkdir(exist_ok=True)
            self.cgroups.append(path)
            period = 100_000
            (path / "cpu.cfs_period_us").write_text(str(period))
            (path / "cpu.cfs_quota_us").write_text(str(max(1000, round(self.cpu_quota * period))))
        return path

    def command(self, node: int, rank: int, argv: list[str]) -> list[str]:
        """``argv`` run inside node ``node``'s namespace (and in ``rank``'s cgroup when CPU is capped)."""
        inner = ["ip", "netns", "exec", self.namespaces[node], *argv]
        cgroup = self.cgroup_for(rank)
        if cgroup is None:
            return inner
        # the shell joins the cgroup, then becomes the command: every thread of the rank is capped
        return ["sh", "-c", f'echo $$ > "{cgroup}/cgroup.procs" && exec "$@"', "sh", *inner]

    def close(self) -> None:
        """Remove every namespace, link and cgroup this object made (safe to call twice)."""
        for ns in self.namespaces:
            _ip("netns", "delete", ns, check=False)
        self.namespaces.clear()
        for dev in self._host_ends:  # gone with its namespace unless the build stopped before moving the peer
            _ip("link", "delete", dev, check=False)
        self._host_ends.clear()
        if self._bridge is not None:
            _ip("link", "delete", self._bridge, check=False)
            self._bridge = None
        for path in self.cgroups:
            for attempt in range(50):  # a rank that just exited may still be listed for a moment
                try:
                    path.rmdir()
                    break
                except OSError:
                    if attempt < 49:
                        time.sleep(0.1)
        self.cgroups.clear()
