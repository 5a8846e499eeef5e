"""Where plugins live: the ordered *roots* and the one resolver from a name to a path.

A root is a folder that may hold ``methods/``, ``datasets/``, ``hardware_profiles/`` and ``configs/``.

* The *base root* holds the shipped plugins: ``distrepro/_shipped`` in an installed wheel (the build
  copies them there, see ``setup.py``), else the checkout above the ``distrepro`` package.
  ``DISTREPRO_ROOT`` replaces it (tests, a second checkout).
* *User roots* add to it, so users keep their plugins outside the repository: ``DISTREPRO_PATH``
  (``os.pathsep``-separated) and the CLI's ``--root``. :func:`add_roots` exports them to
  ``DISTREPRO_PATH`` so that ranks started by the distributed engine find the same plugins.

A name defined in two roots is an error naming both paths: letting one silently win would make a
result depend on the order of a search path. This module knows paths only (no plugin is imported
here), so the hardware profiles and the plugin registry both resolve names through it without
importing each other.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from distrepro.errors import ConfigError, PluginError, did_you_mean

#: files in ``hardware_profiles/`` that are not profiles (the workload table)
RESERVED_PROFILE_NAMES = frozenset({"workloads"})

#: environment variable listing user roots (``os.pathsep``-separated), added to the shipped plugins
PATH_ENV = "DISTREPRO_PATH"
#: environment variable replacing the base root (the shipped plugins)
ROOT_ENV = "DISTREPRO_ROOT"
#: what a root may hold; the wheel ships these folders under ``distrepro/_shipped``
PLUGIN_DIRS = ("methods", "datasets", "hardware_profiles", "configs")

_PACKAGE = Path(__file__).resolve().parents[1]
RootArg = Path | str | Sequence[Path | str] | None


def shipped_root() -> Path:
    """The shipped plugins: ``distrepro/_shipped`` in a wheel install, else the checkout holding ``distrepro/``."""
    installed = _PACKAGE / "_shipped"
    return installed if (installed / "methods").is_dir() else _PACKAGE.parent


def repo_root() -> Path:
    """The base root: ``DISTREPRO_ROOT`` or the shipped plugins (:func:`shipped_root`)."""
    env = os.environ.get(ROOT_ENV)
    return Path(env).resolve() if env else shipped_root()


def _check_root(path: Path, origin: str) -> Path:
    if not path.is_dir():
        raise ConfigError(origin, None, f"plugin root '{path}' is not a folder")
    if not any((path / d).is_dir() for d in PLUGIN_DIRS):
        raise ConfigError(origin, None, f"plugin root '{path}' holds none of {', '.join(d + '/' for d in PLUGIN_DIRS)}")
    return path


def user_roots() -> tuple[Path, ...]:
    """The roots listed in ``DISTREPRO_PATH``, each checked to be a folder holding plugin folders."""
    entries = [e for e in os.environ.get(PATH_ENV, "").split(os.pathsep) if e.strip()]
    return tuple(_check_root(Path(e).expanduser().resolve(), PATH_ENV) for e in entries)


def add_roots(paths: Iterable[str | Path], origin: str = "--root") -> None:
    """Add user roots for this process and its children (exported to ``DISTREPRO_PATH``).

    Each entry may itself be an ``os.pathsep``-separated list. A bad root is a :class:`ConfigError`
    naming ``origin``, raised before anything is exported.
    """
    new: list[str] = []
    for item in paths:
        for entry in str(item).split(os.pathsep):
            if entry.strip():
                new.append(str(_check_root(Path(entry).expanduser().resolve(), origin)))
    current = [e for e in os.environ.get(PATH_ENV, "").split(os.pathsep) if e.strip()]
    merged = list(dict.fromkeys([*current, *new]))
    if merged:
        os.environ[PATH_ENV] = os.pathsep.join(merged)


def roots() -> tuple[Path, ...]:
    """The base root, then the user roots (a user root that is the base root again is dropped)."""
    base = repo_root()
    return tuple(dict.fromkeys([base, *user_roots()]))


def as_roots(root: RootArg) -> tuple[Path, ...]:
    """``None``: every root (:func:`roots`); a path or a list of paths: exactly those (tests)."""
    if root is None:
        return roots()
    if isinstance(root, (str, Path)):
        return (Path(root),)
    return tuple(Path(r) for r in root)


def defined_twice(kind: str, name: str, first: Path, second: Path) -> PluginError:
    return PluginError(f"{kind} '{name}' is defined twice: {first} and {second}; rename one or drop one root")


def method_dirs(root: RootArg = None) -> dict[str, Path]:
    """Method folders by name (``_``/``.``-prefixed ones are ignored), over the roots; read, not imported."""
    found: dict[str, Path] = {}
    for base in as_roots(root):
        folder = base / "methods"
        for path in sorted(folder.iterdir() if folder.is_dir() else []):
            if not path.is_dir() or path.name.startswith(("_", ".")):
                continue
            if path.name in found:
                raise defined_twice("method", path.name, found[path.name], path)
            found[path.name] = path
    return found


def profile_paths(root: RootArg = None) -> dict[str, Path]:
    """Hardware profile files by name over the roots (``workloads.yaml`` is the workload table, not a profile)."""
    found: dict[str, Path] = {}
    for base in as_roots(root):
        for path in sorted((base / "hardware_profiles").glob("*.yaml")):
            if path.stem in RESERVED_PROFILE_NAMES:
                continue
            if path.stem in found:
                raise defined_twice("hardware profile", path.stem, found[path.stem], path)
            found[path.stem] = path
    return found


def profile_names(root: RootArg = None) -> list[str]:
    return sorted(profile_paths(root))


def find_profile(name: str) -> Path:
    """The file of hardware profile ``name`` over every root; a :class:`ConfigError` listing them if none has it."""
    found = profile_paths()
    if name in found:
        return found[name]
    where = ", ".join(str(r / "hardware_profiles") for r in roots())
    known = ", ".join(sorted(found)) or "none"
    missing = repo_root() / "hardware_profiles" / f"{name}.yaml"
    hint = did_you_mean(name, found)
    raise ConfigError(missing, None, f"hardware profile not found{hint} (available profiles in {where}: {known})")


def find_file(relative: str | Path, root: RootArg = None) -> Path | None:
    """``relative`` (e.g. ``configs/quickstart.yaml``) in the first root that has it, else None.

    Lets ``distrepro run configs/quickstart.yaml`` work from any folder, a wheel install included.
    """
    for base in as_roots(root):
        path = base / relative
        if path.is_file():
            return path
    return None
