"""What a paper's results depend on in the repository: its ``paper.yaml`` and its arms' run configs, as one digest;
and, since records freeze them, every input that decides a verdict, one digest per kind (:func:`frozen_digests`).

``RESULTS.md`` records this digest per paper, and each ``distrepro reproduce`` tags its umbrella run with the digest
it ran on (``distrepro.inputs``). A test recomputes the digests: when a claim, an arm or a config changes, the
committed results no longer describe the code, and the test says which command regenerates them. A run made on
other inputs shows as such in the file instead of passing for current.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from distrepro.claims import frozen
from distrepro.claims.papers import PaperInfo, arm_config_path
from distrepro.errors import ConfigError
from distrepro.safe_yaml import load_yaml

INPUTS_TAG = "distrepro.inputs"
SCALES = ("proxy", "mid", "gpu", "paper")
DIGEST_CHARS = 12


def paper_inputs(info: PaperInfo, root: Path | None = None) -> list[Path]:
    """``paper.yaml`` and every arm's run config at every scale that has one, each once, in a stable order."""
    if info.path is None:
        return []
    files = [info.path]
    arms = info.spec.setup.arms if info.spec is not None else {}
    for name, arm in arms.items():
        for scale in SCALES:
            try:
                files.append(arm_config_path(info.path, name, arm.config, scale, root))
            except ConfigError:  # an arm without a config at this scale: nothing to hash there
                continue
    return list(dict.fromkeys(files))


def inputs_digest(info: PaperInfo, root: Path | None = None) -> str:
    """The first hex digits of a SHA-256 over each input's name and bytes (names keep a rename from hashing alike).

    The names are taken relative to the paper's method folder's parent, so the digest does not depend on where the
    checkout lives."""
    h = hashlib.sha256()
    base = info.path.parent.parent if info.path is not None else Path()
    for path in paper_inputs(info, root):
        try:
            name = str(path.resolve().relative_to(base.resolve()))
        except ValueError:  # a config shared from another plugin root
            name = path.name
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:DIGEST_CHARS]


def configs_digest(info: PaperInfo, scale: str, read: Callable[[Path], str | None], root: Path | None = None) -> str:
    """What the runs at ``scale`` depend on, as one digest: ``paper.yaml``'s arms and each arm's run config at that
    scale, as parsed YAML data, each file read through ``read`` (the checkout's text, or a commit's).

    Why not :func:`inputs_digest`: that one covers the claims too (a margin changes the verdicts, not the runs) and
    every byte (a comment reworded in a config marked every run of the paper "made on other inputs"). A run at
    ``scale`` was made on the current configs when this digest, taken on its commit's files, equals the checkout's.
    A file that is missing or does not parse hashes as such, so it differs from any real one."""
    if info.path is None:
        return ""

    def parsed(path: Path) -> object:
        text = read(path)
        if text is None:
            return "<missing>"
        try:
            return load_yaml(text, path)
        except ConfigError:
            return "<unparsable>"

    def canonical(value: object) -> bytes:
        return json.dumps(value, sort_keys=True, default=str).encode() + b"\0"

    paper = parsed(info.path)  # its arms only: the claims decide verdicts, not what the runs did
    arms = (paper.get("setup") or {}).get("arms") if isinstance(paper, dict) else paper
    h = hashlib.sha256(canonical(arms))
    for name, arm in (info.spec.setup.arms if info.spec is not None else {}).items():
        try:
            path = arm_config_path(info.path, name, arm.config, scale, root)
        except ConfigError:  # no config at this scale: nothing to hash
            continue
        h.update(name.encode() + b"\0" + canonical(parsed(path)))
    return h.hexdigest()[:DIGEST_CHARS]


def frozen_digests(info: PaperInfo, root: Path | None = None) -> dict[str, str]:
    """Kind → digest of every input a pre-registration freezes (:mod:`distrepro.claims.frozen`), over every scale:
    paper.yaml with its ``setup:``, the arms' configs, the hardware profiles with their ranges, the emulator's error
    band and the emulator and claims code. RESULTS.md records them (a ``frozen-inputs`` mark) beside
    :func:`inputs_digest`, so that ``distrepro results --check`` names the input that changed since its runs."""
    return frozen.kind_digests(frozen.file_digests(info, SCALES, root))


def kind_slug(kind: str) -> str:
    """``"arm configs"`` → ``"arm-configs"``: a kind as a key of RESULTS.md's ``frozen-inputs`` mark."""
    return kind.replace(" ", "-")
