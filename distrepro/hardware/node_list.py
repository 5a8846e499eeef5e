"""A profile's ``nodes:`` list as written, before the schema reads it: ``count`` expanded, the world bounded first.

Kept apart from :mod:`distrepro.hardware.profiles` (which assembles a profile) because it guards the machine, not the
model: a ``count`` is held to :data:`~distrepro.hardware.profile_parts.MAX_RANKS` before any node is copied.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from distrepro.hardware.profile_parts import MAX_RANKS


class _Named(Protocol):
    name: str


_N = TypeVar("_N", bound=_Named)


def _declared_devices(node: dict[str, Any]) -> int:
    """Devices one node entry declares per node (the ``count`` of each device group that has a whole one; a
    malformed group is left to the schema, which names it)."""
    groups = node.get("devices")
    if not isinstance(groups, list):
        return 0
    counts = [g.get("count", 1) if isinstance(g, dict) else 1 for g in groups]
    return sum(c for c in counts if isinstance(c, int) and not isinstance(c, bool) and c > 0)


def _check_world_before_expanding(nodes: list[Any]) -> None:
    """The ranks the ``nodes`` list declares (each entry's ``count`` times its devices per node), held to
    :data:`MAX_RANKS` before any node is copied: ``count: 2000000`` built two million nodes (gigabytes) before the
    rank limit was checked, and ``count: 1000000000`` would have exhausted the machine. The message names the entry
    (``nodes[i].count``) that crosses the limit."""
    total = 0
    for i, node in enumerate(nodes):
        if not isinstance(node, dict):
            continue
        count = node.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            continue  # refused with its own message below
        per_node = max(1, _declared_devices(node))
        total += count * per_node
        if total > MAX_RANKS:
            where = f"nodes[{i}].count" if "count" in node else f"nodes[{i}].devices"
            raise ValueError(
                f"{where}: {count} node(s) of {per_node} device(s) bring the cluster to {total} devices, more than "
                f"the {MAX_RANKS} ranks a run can hold (refused before any node is built)"
            )


def expand_node_counts(nodes: Any) -> Any:
    """``{count: N, name: box, ...}`` is N identical nodes named ``box0`` … ``box{N-1}``: a cluster of identical
    machines is written once. Anything but a list is left to the schema, which names it."""
    if not isinstance(nodes, list):
        return nodes
    _check_world_before_expanding(nodes)
    out: list[Any] = []
    for node in nodes:
        if not isinstance(node, dict) or "count" not in node:
            out.append(node)
            continue
        count = node["count"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"node 'count' must be a whole number >= 1, got {count!r}")
        rest = {k: v for k, v in node.items() if k != "count"}
        name = rest.get("name", "node")
        out.extend(rest | {"name": f"{name}{i}" if count > 1 else name} for i in range(count))
    return out


def check_unique_node_names(nodes: list[_N]) -> list[_N]:
    """``nodes`` unchanged, or a ValueError naming the repeated names (they decide intra- vs inter-node links)."""
    seen: set[str] = set()
    repeated: set[str] = set()
    for node in nodes:  # one pass (not a count per name: a profile may list 10,000 nodes)
        (repeated if node.name in seen else seen).add(node.name)
    dupes = sorted(repeated)
    if dupes:
        raise ValueError(f"node names must be unique (they decide intra- vs inter-node links): {dupes}")
    return nodes
