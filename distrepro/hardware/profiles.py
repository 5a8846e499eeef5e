"""Hardware profiles: the emulated cluster a run is charged against (``hardware_profiles/*.yaml``).

A profile declares devices (what each rank is, how fast it trains each workload, how its speed
varies) and links (latency and bandwidth between ranks). The training math always runs on the
real machine; only *time* comes from here, so every figure carries a provenance tag
(``[M]`` measured, ``[D]`` derived, ``[E]`` estimated, ``[S]`` spec, ``[L]`` local measurement, see
``hardware_profiles/README.md``) and the schema refuses a source without one: a reader of a result must
be able to tell a measured number from a guess.

Ranks are numbered 0..world_size-1 in file order, node by node and group by group, so the same
file always gives the same rank layout. Every loading problem is a :class:`ConfigError` naming the
file and the field, because a profile is user input. The parts (devices, nodes, links, noise) are in
:mod:`distrepro.hardware.profile_parts`; this module assembles and loads them.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import (
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from distrepro.errors import ConfigError, format_pydantic_error
from distrepro.hardware.catalogue import resolve_compute
from distrepro.hardware.link_classes import LinkClasses
from distrepro.hardware.node_list import check_unique_node_names, expand_node_counts
from distrepro.hardware.profile_parts import (
    DEFAULT_BACKWARD_FRACTION,
    MAX_RANKS,
    Backward,
    DeviceGroup,
    Framework,
    Link,
    Network,
    Node,
    Noise,
    ResolvedLink,
    Strict,
    resolve_link,
)
from distrepro.hardware.profile_ranges import ChoiceRange, check_profile_ranges, unranged_estimates
from distrepro.plugins.roots import RESERVED_PROFILE_NAMES
from distrepro.safe_yaml import read_yaml_mapping


class HardwareProfile(Strict):
    """A validated profile. Build it with :func:`load_profile` so errors name the file."""

    #: 1: devices, links and per-device NICs; 2 adds per-node NICs, message overhead, pattern efficiency and
    #: the backward share of a step. Version-1 files load unchanged; a version-2 key in a version-1 file is an
    #: error (a reader of a v1 file must not meet semantics it does not declare).
    schema_version: Literal[1, 2]
    name: str = Field(min_length=1)
    description: str
    sources: list[str] = Field(default_factory=list)
    nodes: list[Node] = Field(min_length=1)
    network: Network
    noise: Noise | None = None
    backward: Backward | None = None
    #: how collectives run (:mod:`distrepro.timing.collective_algorithms`): ``auto`` follows NCCL's choice of ring
    #: or tree and of protocol; ``ring`` keeps the flat alpha-beta model of schema 1 (textbook ring, binomial
    #: broadcast)
    collective_algorithm: Literal["auto", "ring", "tree", "hierarchical"] = "auto"
    #: the framework's backend and costs (:class:`~distrepro.hardware.profile_parts.Framework`); None: the defaults
    #: of :mod:`distrepro.timing.framework` (NCCL on an all-GPU cluster, gloo otherwise)
    framework: Framework | None = None
    #: plausible alternatives of the profile's categorical figures (``collective_algorithm: {choices: [auto,
    #: hierarchical], reason: ...}``), swept like the numeric ranges (:mod:`distrepro.hardware.profile_ranges`)
    ranges: dict[str, ChoiceRange] = Field(default_factory=dict)

    _ranks: list[tuple[int, int]] = PrivateAttr(default_factory=list)
    _source_path: str | None = PrivateAttr(default=None)
    _variant: str | None = PrivateAttr(default=None)
    _links: LinkClasses | None = PrivateAttr(default=None)

    @field_validator("nodes", mode="before")
    @classmethod
    def _expand_node_counts(cls, nodes: Any) -> Any:
        return expand_node_counts(nodes)

    @field_validator("nodes")
    @classmethod
    def _unique_node_names(cls, nodes: list[Node]) -> list[Node]:
        return check_unique_node_names(nodes)

    @model_validator(mode="after")
    def _bounded_world(self) -> HardwareProfile:
        total = sum(g.count for n in self.nodes for g in n.devices)
        if total > MAX_RANKS:
            raise ValueError(f"declares {total} devices, more than the {MAX_RANKS} ranks a run can hold")
        return self

    @model_validator(mode="after")
    def _choice_ranges(self) -> HardwareProfile:
        check_profile_ranges(
            {"collective_algorithm": self.collective_algorithm},
            self.ranges,
            {"collective_algorithm": get_args(type(self).model_fields["collective_algorithm"].annotation)},
        )
        return self

    @model_validator(mode="after")
    def _version_keys(self) -> HardwareProfile:
        if self.schema_version < 2:
            v2 = [f"nodes[{i}].nic" for i, n in enumerate(self.nodes) if n.nic is not None]
            nets = [self.network, *(self.network.variants or {}).values()]
            if any(n.message_overhead_us or n.overhead_source or n.efficiency for n in nets):
                v2.append("network.message_overhead_us/efficiency")
            if self.backward is not None:
                v2.append("backward")
            v2 += [
                f"nodes[{i}].devices[{j}].{key}"
                for i, n in enumerate(self.nodes)
                for j, g in enumerate(n.devices)
                for key in ("step_overhead_ms", "step_floor_ms", "step_jitter_sigma", "host_sync_ms")
                if getattr(g, key)
            ]
            if v2:
                raise ValueError(f"{', '.join(v2)} need schema_version: 2")
        return self

    def model_post_init(self, context: Any, /) -> None:
        ranks: list[tuple[int, int]] = []
        for i, node in enumerate(self.nodes):
            for j, group in enumerate(node.devices):
                ranks.extend([(i, j)] * group.count)
        self._ranks = ranks
        self._links = None  # built at the first link asked for (a profile that is only listed needs none)

    # ------------------------------------------------------------------ identity
    def __eq__(self, other: object) -> bool:
        """Equal when the declared hardware is equal; where it was loaded from and the link cache
        (pydantic would compare private attributes too) do not matter."""
        if not isinstance(other, HardwareProfile):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # lists inside; use digest() as a key

    @property
    def source_path(self) -> str | None:
        """The file this profile was loaded from (``None`` if built in memory)."""
        return self._source_path

    @property
    def variant(self) -> str | None:
        """The network variant selected at load time (``None`` = the default network)."""
        return self._variant

    @property
    def origin(self) -> str:
        """What an error message should name: the file, else the profile name."""
        return self._source_path or f"<profile {self.name}>"

    def unranged_estimates(self) -> list[str]:
        """Fields graded ``[E]`` without a plausible range (held fixed by a sensitivity sweep)."""
        return unranged_estimates(self)

    def digest(self) -> str:
        """sha256 of the canonical JSON of the validated model (MLflow tag: which hardware exactly)."""
        data = self.model_dump(mode="json")
        if data.get("framework") is None:  # a profile without the block keeps the digest it had before the block
            data.pop("framework", None)
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def to_yaml_dict(self) -> dict[str, Any]:
        """Plain data that loads back into an equal profile (for run artifacts)."""
        return self.model_dump(mode="json")

    # ------------------------------------------------------------------ ranks
    def _private(self) -> dict[str, Any]:
        """The private attributes, read straight from pydantic's store: ``self._ranks`` goes through
        ``BaseModel.__getattr__`` (microseconds a read), and every device, node and link lookup of the clock, the
        layout and the collectives reads the rank table (a hundred thousand times in a report)."""
        private = self.__pydantic_private__
        assert private is not None  # set by model_post_init (pydantic initialises the private store first)
        return private

    @property
    def world_size(self) -> int:
        return len(self._private()["_ranks"])

    def _locate(self, rank: int) -> tuple[int, int]:
        ranks: list[tuple[int, int]] = self._private()["_ranks"]
        if not 0 <= rank < len(ranks):
            raise ConfigError(
                self.origin,
                "nodes",
                f"rank {rank} is out of range: this profile has world_size {self.world_size}",
            )
        return ranks[rank]

    def device(self, rank: int) -> DeviceGroup:
        i, j = self._locate(rank)
        return self.nodes[i].devices[j]

    def device_path(self, rank: int) -> str:
        """Dotted path of the rank's device group, as error messages name fields."""
        i, j = self._locate(rank)
        return f"nodes[{i}].devices[{j}]"

    def node_of(self, rank: int) -> str:
        return self.nodes[self._locate(rank)[0]].name

    def node_index(self, rank: int) -> int:
        return self._locate(rank)[0]

    def node_nic(self, index: int) -> Link | None:
        """The NIC the node's devices share: ``nic`` of the node, else the device-level ``nic`` of a
        one-device node (schema 1 declared it there), else None (the uplink is ``network.inter_node``)."""
        node = self.nodes[index]
        if node.nic is not None:
            return node.nic
        if len(node.devices) == 1 and node.devices[0].count == 1:
            return node.devices[0].nic
        return None

    def backend(self) -> str:
        """``nccl`` or ``gloo``: the declared backend, else NCCL when every device is a GPU (``torch.distributed`` runs
        NCCL only there), else gloo."""
        declared = self.framework.backend if self.framework is not None else None
        if declared is not None:
            return declared
        gpus = all(g.kind == "gpu" for n in self.nodes for g in n.devices)
        return "nccl" if gpus else "gloo"

    def backward_fraction(self) -> float:
        return self.backward.fraction if self.backward is not None else DEFAULT_BACKWARD_FRACTION

    def efficiency(self, pattern: str) -> float:
        eff = self.network.efficiency
        return float(getattr(eff, pattern, 1.0)) if eff is not None else 1.0

    # ------------------------------------------------------------------ links
    def link(self, a: int, b: int) -> ResolvedLink:
        """The path between ranks ``a`` and ``b``: intra- or inter-node, capped by either NIC (resolved once per
        class of equal paths, :mod:`distrepro.hardware.link_classes`, not once per pair)."""
        if a == b:
            raise ValueError(f"link({a}, {b}): a rank has no link to itself")
        links = self._private()["_links"] or self.link_classes()  # pydantic's private-attribute reads are slow
        k = len(links.node_of)
        if not (0 <= a < k and 0 <= b < k):
            self._locate(b if 0 <= a < k else a)  # raises the ConfigError naming the profile
        return links.link(a, b)

    def link_classes(self) -> LinkClasses:
        """Every rank's path signatures and the distinct links between ranks (built once, in O(K))."""
        if self._links is None:
            node_nics = [self.node_nic(i) for i in range(len(self.nodes))]
            dev_nics = [self.nodes[i].devices[j].nic for i, j in self._ranks]
            self._links = LinkClasses(
                [i for i, _ in self._ranks],
                [(nic,) for nic in dev_nics],
                [(nic, node_nics[i]) for nic, (i, _) in zip(dev_nics, self._ranks, strict=True)],
                self.network.intra_node,
                self.network.inter_node,
                self.network.message_overhead_us,
            )
        return self._links

    def server_link(self, rank: int) -> ResolvedLink:
        """The rank's path to the parameter server (network.server or inter_node), capped by its NIC."""
        i = self._locate(rank)[0]
        over = self.network.message_overhead_us
        return resolve_link(
            self.network.server or self.network.inter_node, self.device(rank).nic, self.node_nic(i), overhead_us=over
        )

    def server_uplink(self) -> ResolvedLink:
        """The server's own link, which serialises all workers' pushes and pulls."""
        return resolve_link(self.network.server or self.network.inter_node)

    def with_variant(self, variant: str) -> HardwareProfile:
        """A copy whose network is the named variant (the variants table is kept for the record)."""
        variants = self.network.variants or {}
        if variant not in variants:
            known = ", ".join(sorted(variants)) or "none defined"
            raise ConfigError(self.origin, "network.variants", f"unknown variant '{variant}'; available: {known}")
        data = self.model_dump()
        data["network"] = {**variants[variant].model_dump(), "variants": data["network"]["variants"]}
        new = HardwareProfile.model_validate(data)
        new._source_path = self._source_path
        new._variant = variant
        return new


# ---------------------------------------------------------------------- loading


def profiles_dir(search_dir: Path | None = None) -> Path:
    """``search_dir``, else ``$DISTREPRO_PROFILES_DIR``, else the base root's ``hardware_profiles/`` (the shipped
    profiles and the workload table; a user root's profiles are found by name:
    :func:`distrepro.plugins.roots.find_profile`)."""
    if search_dir is not None:
        return Path(search_dir)
    env = os.environ.get("DISTREPRO_PROFILES_DIR")
    if env:
        return Path(env)
    from distrepro.plugins.roots import repo_root

    return repo_root() / "hardware_profiles"


def _one_folder(search_dir: Path | None) -> bool:  # given, or $DISTREPRO_PROFILES_DIR; else every root
    return search_dir is not None or bool(os.environ.get("DISTREPRO_PROFILES_DIR"))


def list_profiles(search_dir: Path | None = None) -> list[str]:
    """Names of the profiles in the search directory, else in every plugin root (``workloads.yaml`` is not one)."""
    if not _one_folder(search_dir):
        from distrepro.plugins.roots import profile_names

        return profile_names()
    folder = profiles_dir(search_dir)
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.yaml") if p.stem not in RESERVED_PROFILE_NAMES)


def _looks_like_path(name_or_path: str | Path) -> bool:
    text = str(name_or_path)
    return isinstance(name_or_path, Path) or text.endswith((".yaml", ".yml")) or "/" in text or os.sep in text


def load_profile(
    name_or_path: str | Path, variant: str | None = None, search_dir: Path | None = None
) -> HardwareProfile:
    """Load and validate a profile by name (``<search_dir>/<name>.yaml``) or by path.

    ``variant`` selects one of ``network.variants`` (e.g. ``"geo"``) as the network. A profile found by name must
    say that name in its ``name:``: runs are tagged and reported by the inner name, and a copy that kept the
    original's would run under a name the user never typed. A file given by path may name itself.
    """
    folder = profiles_dir(search_dir)
    by_name = not _looks_like_path(name_or_path)
    if not by_name:
        path = Path(name_or_path)
    elif not _one_folder(search_dir):
        from distrepro.plugins.roots import find_profile

        path = find_profile(str(name_or_path))  # over every root; not found names them all
    else:
        path = folder / f"{name_or_path}.yaml"
    if not path.is_file():
        known = ", ".join(list_profiles(folder)) or "none"
        raise ConfigError(path, None, f"hardware profile not found; available profiles in {folder}: {known}")
    if path.stem in RESERVED_PROFILE_NAMES:
        raise ConfigError(path, None, f"'{path.stem}.yaml' is the workload table, not a hardware profile")
    data = resolve_compute(read_yaml_mapping(path, "hardware profile"), path)  # catalogue references, if any
    try:
        profile = HardwareProfile.model_validate(data)
    except ValidationError as exc:
        raise format_pydantic_error(path, exc) from None
    if by_name and profile.name != path.stem:  # asked for by its file name, tagged and reported by the inner one
        raise ConfigError(
            path,
            "name",
            f"'{profile.name}' differs from the file name '{path.stem}'; runs would be recorded as "
            f"'{profile.name}': rename the file or the profile so that they match",
        )
    profile._source_path = str(path)
    if variant is not None:
        profile = profile.with_variant(variant)
    return profile
