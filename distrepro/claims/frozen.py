"""What decides a verdict besides the claim itself, as digests: the inputs a pre-registration freezes.

A verdict depends on more than its claim's fields: the paper's ``setup:`` (arms, profile, ``min_seeds``, the
sensitivity ranges), each arm's run config, the hardware profiles the arms run on with the ranges declared for
their estimated figures, the emulator's error bands (``hardware_profiles/validation/emulator_error.yaml``), the code
that turns a run into emulated time and a verdict (``distrepro/timing``, ``distrepro/hardware``, ``distrepro/claims``)
and the number of hardware samples the sensitivity check draws. Narrowing a profile's bandwidth range can turn a
"depends on an assumption" into a PASS as surely as widening a tolerance can; so the record of a scale
(:mod:`distrepro.claims.preregistration`) keeps one SHA-256 per input file, grouped by :data:`KINDS`, and
RESULTS.md one digest per kind (:func:`kind_digests`), and both name what changed since.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from distrepro.errors import ConfigError

PAPER, CONFIGS, PROFILES, BANDS, CODE = (
    "paper.yaml",
    "arm configs",
    "hardware profiles",
    "emulator error band",
    "emulator and claims code",
)
#: the kinds of input, in the order a report names them
KINDS = (PAPER, CONFIGS, PROFILES, BANDS, CODE)
#: the packages whose Python files decide emulated time and verdicts (one digest over all of them)
CODE_PACKAGES = ("timing", "hardware", "claims")
CODE_NAME = "distrepro/{timing,hardware,claims}/**/*.py"
DIGEST_CHARS = 12


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def code_digest() -> str:
    """SHA-256 over the name and bytes of every ``.py`` file under ``distrepro/timing``, ``distrepro/hardware`` and
    ``distrepro/claims``, in a stable order (names relative to the package, so the checkout's place does not count)."""
    import distrepro

    package = Path(distrepro.__file__).resolve().parent
    h = hashlib.sha256()
    for sub in CODE_PACKAGES:
        for path in sorted((package / sub).rglob("*.py")):
            h.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _name(path: Path, bases: Iterable[Path]) -> str:
    """``path`` relative to the first of ``bases`` (plugin roots) that holds it, as given and then with links
    resolved, else its last three parts: a name that does not depend on where the checkout lives."""
    import os

    bases = list(bases)
    for pick in (lambda x: Path(os.path.abspath(x)), lambda x: x.resolve()):
        for base in bases:
            try:
                return str(pick(path).relative_to(pick(base)))
            except ValueError:
                continue
    return str(Path(*path.resolve().parts[-3:]))


def _profile_names(info: Any, configs: Iterable[Path]) -> list[str]:
    """The profiles the paper's arms and claims name: ``setup.profile``, each claim's ``profile`` and each arm
    config's ``profile:`` (a name or a list of names)."""
    from distrepro.config.run_config import read_yaml

    spec = info.spec
    names: list[str] = []
    if spec is not None:
        names += [p for p in [spec.setup.profile, *(c.profile for c in spec.claims)] if isinstance(p, str)]
    for path in configs:
        try:
            value = read_yaml(path).get("profile")
        except (ConfigError, AttributeError):
            continue
        names += [value] if isinstance(value, str) else [p for p in value or [] if isinstance(p, str)]
    return list(dict.fromkeys(n for n in names if n))


def input_files(info: Any, scales: Iterable[str], root: Path | None = None) -> dict[str, list[Path]]:
    """Kind → the files of that kind ``info``'s verdicts at ``scales`` depend on (the code is not a file list)."""
    from distrepro.claims.papers import arm_config_path
    from distrepro.hardware.emulator_error import bands_path
    from distrepro.plugins.roots import find_profile

    if info.path is None:
        return {}
    configs: list[Path] = []
    arms = info.spec.setup.arms if info.spec is not None else {}
    for scale in scales:
        for name, arm in arms.items():
            try:
                configs.append(arm_config_path(info.path, name, arm.config, scale, root))
            except ConfigError:  # an arm without a config at this scale
                continue
    configs = list(dict.fromkeys(configs))
    profiles = []
    for name in _profile_names(info, configs):
        try:
            profiles.append(find_profile(name))
        except ConfigError:  # a profile no root has: nothing to freeze, and the runs would not start either
            continue
    try:
        bands = [bands_path()]
    except ConfigError:
        bands = []
    return {PAPER: [info.path], CONFIGS: configs, PROFILES: profiles, BANDS: bands}


def file_digests(info: Any, scales: Iterable[str], root: Path | None = None) -> dict[str, dict[str, str]]:
    """Kind → {file name: SHA-256 of its bytes (paper.yaml: :func:`paper_digest`)}, and the code's one digest under
    :data:`CODE`: what a record's ``frozen:`` block keeps."""
    from distrepro.plugins.roots import as_roots, shipped_root

    # the paper's own root first (``<root>/methods/<name>/paper.yaml``), then the shipped one: a name must not depend
    # on which roots a caller passes, or a record and a report would name one file apart
    bases = [info.path.parent.parent.parent] if info.path is not None else []
    bases += [shipped_root(), *as_roots(root)]
    out = {
        kind: {_name(p, bases): paper_digest(p) if kind == PAPER else _sha(p.read_bytes()) for p in files}
        for kind, files in input_files(info, scales, root).items()
    }
    out[CODE] = {CODE_NAME: code_digest()}
    return out


def paper_digest(path: Path) -> str:
    """SHA-256 of paper.yaml as parsed data without its ``claims:`` (each claim has its own hash in a record, so that
    editing one claim makes that claim post hoc, not every other) and without ``setup.notes``: ``setup:`` (arms,
    profile, ``min_seeds``, the sensitivity ranges and samples), the citation and the rest."""
    import json

    from distrepro.config.run_config import read_yaml

    data = dict(read_yaml(path))
    data.pop("claims", None)
    if isinstance(data.get("setup"), dict):
        data["setup"] = {k: v for k, v in data["setup"].items() if k != "notes"}
    return _sha(json.dumps(data, sort_keys=True, default=str, ensure_ascii=False).encode())


def kind_digests(files: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """One digest per kind (its files' names and digests), first :data:`DIGEST_CHARS` hex digits: RESULTS.md's."""
    out = {}
    for kind in KINDS:
        h = hashlib.sha256()
        for name, digest in sorted((files.get(kind) or {}).items()):
            h.update(f"{name}\0{digest}\0".encode())
        out[kind] = h.hexdigest()[:DIGEST_CHARS]
    return out


def changed(then: Mapping[str, Any], now: Mapping[str, Mapping[str, str]]) -> list[str]:
    """What differs between the frozen digests ``then`` (kind → {name: digest}) and ``now``: one phrase per file
    (changed, added, removed), in :data:`KINDS` order; empty when nothing changed."""
    out = []
    for kind in KINDS:
        old, new = dict(then.get(kind) or {}), dict(now.get(kind) or {})
        for name in sorted(set(old) | set(new)):
            if name not in new:
                out.append(f"{kind}: `{name}` no longer used")
            elif name not in old:
                out.append(f"{kind}: `{name}` added")
            elif old[name] != new[name]:
                out.append(f"{kind}: `{name}` changed")
    return out


def sensitivity_samples(spec: Any, given: int | None = None, sweep: bool = False) -> int:
    """The hardware samples the sensitivity check draws: ``given`` (``--samples``), else the paper's
    ``setup.sensitivity.samples`` for the full sweep, capped for the default check
    (:data:`distrepro.sensitivity.dependence.DEFAULT_SAMPLES`, 32)."""
    if given:
        return int(given)
    declared = int(spec.setup.sensitivity.samples) if spec is not None else 0
    return declared if sweep else min(DEFAULT_CHECK_SAMPLES, declared)


#: the default check's cap (kept equal to distrepro.sensitivity.dependence.DEFAULT_SAMPLES, a layer above)
DEFAULT_CHECK_SAMPLES = 32
