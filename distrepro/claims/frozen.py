"""What decides a verdict besides the claim itself, as digests: the inputs a pre-registration freezes.

A verdict depends on more than its claim's fields: the paper's ``setup:`` (arms, profile, ``min_seeds``, the
sensitivity ranges), each arm's run config, the hardware profiles the arms run on with the ranges declared for
their estimated figures, the emulator's error bands (``hardware_profiles/validation/emulator_error.yaml``), the code
that turns a run into emulated time and a verdict (``distrepro/timing``, ``distrepro/hardware``, ``distrepro/claims``),
the code whose math the runs train with (the method plugins and dataset modules the arms' configs name, and the
plugin API, models and optimizers they are built from: ``distrepro/{api,training,data}``) and the number of hardware
samples the sensitivity check draws. A re-implementation edited after its runs decides a FAIL as surely as a changed
tolerance; the engines that execute the math are the instrument, checked against each other by their equality tests,
and are not frozen. Narrowing a profile's bandwidth range can turn a
"depends on an assumption" into a PASS as surely as widening a tolerance can; so the record of a scale
(:mod:`distrepro.claims.preregistration`) keeps one SHA-256 per input file, grouped by :data:`KINDS`, and
RESULTS.md one digest per kind (:func:`kind_digests`), and both name what changed since.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from distrepro.errors import ConfigError, PluginError

PAPER, CONFIGS, PROFILES, BANDS, CODE, TRAINING = (
    "paper.yaml",
    "arm configs",
    "hardware profiles",
    "emulator error band",
    "emulator and claims code",
    "method and training code",
)
#: the kinds of input, in the order a report names them
KINDS = (PAPER, CONFIGS, PROFILES, BANDS, CODE, TRAINING)
#: the packages whose Python files decide emulated time and verdicts (one digest over all of them)
CODE_PACKAGES = ("timing", "hardware", "claims")
CODE_NAME = "distrepro/{timing,hardware,claims}/**/*.py"
#: the packages the method plugins train with: the plugin API, models and optimizers, data loading
TRAINING_PACKAGES = ("api", "training", "data")
TRAINING_NAME = "distrepro/{api,training,data}/**/*.py"
DIGEST_CHARS = 12


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def code_digest(packages: Iterable[str] = CODE_PACKAGES) -> str:
    """SHA-256 over the name and bytes of every ``.py`` file under ``distrepro/<package>`` for each of ``packages``
    (default ``timing``, ``hardware``, ``claims``), in a stable order (names relative to the package, so the
    checkout's place does not count)."""
    import distrepro

    package = Path(distrepro.__file__).resolve().parent
    h = hashlib.sha256()
    for sub in packages:
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
    return {
        PAPER: [info.path],
        CONFIGS: configs,
        PROFILES: profiles,
        BANDS: bands,
        TRAINING: _plugin_files(info.path.parent, configs, root),
    }


def _plugin_files(paper_dir: Path, configs: Iterable[Path], root: Path | None) -> list[Path]:
    """The Python files of the paper's own folder (its report products), of each method folder the arm configs'
    ``method:`` names and of each dataset module their ``dataset.name`` names, found over ``root`` and then every
    root. A name no root has is skipped: the runs would not have started either."""
    from distrepro.config.run_config import DatasetConfig, read_yaml
    from distrepro.plugins.roots import as_roots, method_dirs, roots

    default_dataset = DatasetConfig().name
    methods, datasets = [], []
    for path in configs:
        try:
            data = read_yaml(path)
        except ConfigError:
            continue
        methods.append(data.get("method"))
        dataset = data.get("dataset")
        datasets.append(
            dataset.get("name", default_dataset) if isinstance(dataset, dict) else dataset or default_dataset
        )
    searched = (roots(),) if root is None else (as_roots(root), roots())
    found: dict[str, Path] = {}
    for where in searched:
        try:
            found = {**method_dirs(where), **found}  # the first roots' folder wins
        except PluginError:  # a method in two roots: the runs would not have started
            continue
    folders = [paper_dir, *(found[m] for m in methods if isinstance(m, str) and m in found)]
    files = [f for folder in dict.fromkeys(folders) for f in sorted(folder.rglob("*.py"))]
    folders = [b / "datasets" for b in dict.fromkeys(r for where in searched for r in where)]
    for name in dict.fromkeys(d for d in datasets if isinstance(d, str)):
        module = _dataset_file(name, [f for f in folders if f.is_dir()])
        files += [module] if module is not None else []
    return list(dict.fromkeys(f for f in files if "__pycache__" not in f.parts))


def _dataset_file(name: str, folders: list[Path]) -> Path | None:
    """The module of dataset ``name`` in the first of ``folders`` that has it: ``<name>.py``, else a module whose
    ``NAME`` is ``name`` (read as text, not imported: judging claims must not load torch code)."""
    for folder in folders:
        if (stem := folder / f"{name}.py").is_file():
            return stem
    declares = re.compile(rf"^NAME\s*(?::\s*str\s*)?=\s*[\"']{re.escape(name)}[\"']", re.MULTILINE)
    for folder in folders:
        for path in sorted(folder.glob("*.py")):
            if not path.name.startswith(("_", ".")) and declares.search(path.read_text(encoding="utf-8")):
                return path
    return None


def file_digests(info: Any, scales: Iterable[str], root: Path | None = None) -> dict[str, dict[str, str]]:
    """Kind → {file name: SHA-256 of its bytes (paper.yaml: :func:`paper_digest`)}, the emulator's code as one digest
    under :data:`CODE` and the training packages' as one among :data:`TRAINING`'s plugin files: what a record's
    ``frozen:`` block keeps."""
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
    out[TRAINING][TRAINING_NAME] = code_digest(TRAINING_PACKAGES)
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
