"""Plugin discovery: methods, datasets and hardware profiles are found from their folders.

As in benchopt, there is nothing to register: a folder ``methods/<name>/`` with a ``method.py``
defining ``Method`` is a method; ``datasets/<name>.py`` is a dataset; ``hardware_profiles/
<name>.yaml`` is a profile. A plugin that fails to import is reported with its error
(:class:`FailedPlugin`), not a crash, so ``distrepro list`` and the tests can show it.

**Roots.** Every kind is looked up the same way, in an ordered list of *roots*: folders that may
hold ``methods/``, ``datasets/``, ``hardware_profiles/`` and ``configs/``.

* The *base root* holds the shipped plugins: ``distrepro/_shipped`` in an installed wheel (the build
  copies them there, see ``setup.py``), else the checkout above the ``suite`` package.
  ``DISTREPRO_ROOT`` replaces it (tests, a second checkout).
* *User roots* add to it, so users keep their plugins outside the repository: ``DISTREPRO_PATH``
  (``os.pathsep``-separated) and the CLI's ``--root``. :func:`add_roots` exports them to
  ``DISTREPRO_PATH`` so that ranks started by the distributed engine find the same plugins.

A name defined in two roots is an error naming both paths: letting one silently win would make a
result depend on the order of a search path.

**Imports.** A method folder is imported as the package ``_distrepro_methods.<name>`` (its
``__path__`` is the folder; no ``__init__.py`` needed), so ``method.py`` imports its sibling
modules with ``from . import solver``, without touching ``sys.path`` (where two plugins' ``solver.py``
would collide). Tests reach a sibling with :func:`plugin_module`. Private package names also keep the
top-level ``datasets/`` folder from shadowing Hugging Face's ``datasets`` package.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import traceback
import types
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from distrepro.api.method import Method
from distrepro.errors import PluginError, did_you_mean
from distrepro.plugins.roots import RootArg, as_roots, defined_twice, method_dirs
from distrepro.safe_yaml import read_yaml_mapping

#: private parent package of method plugins in ``sys.modules``
METHOD_PACKAGE = "_distrepro_methods"


@dataclass(frozen=True)
class FailedPlugin:
    kind: str
    name: str
    path: Path
    error: str


@dataclass(frozen=True)
class MethodPlugin:
    name: str
    path: Path
    cls: type[Method[Any]]
    paper: dict[str, Any]  # contents of paper.yaml ({} if absent)
    readme: Path | None

    @property
    def paper_id(self) -> str | None:
        """The paper this method reproduces (``paper.yaml: kind: reproduction``), else None."""
        if self.paper.get("kind") == "reproduction":
            cite = self.paper.get("citation") or {}
            return cite.get("id")
        return None


def _short_error(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" ({Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _method_package(name: str, folder: Path) -> str:
    """Register ``folder`` as the package ``_distrepro_methods.<name>``; returns the package's name.

    The same folder keeps its loaded modules (one class per plugin in a process); another folder
    under the same name (a test's copy, another root set) replaces it and its submodules.
    """
    if METHOD_PACKAGE not in sys.modules:
        parent = types.ModuleType(METHOD_PACKAGE, "Private parent package of distrepro method plugins.")
        parent.__path__ = []
        sys.modules[METHOD_PACKAGE] = parent
    package = f"{METHOD_PACKAGE}.{name}"
    loaded = sys.modules.get(package)
    if loaded is not None and list(getattr(loaded, "__path__", [])) == [str(folder)]:
        return package
    for key in [k for k in sys.modules if k == package or k.startswith(package + ".")]:
        del sys.modules[key]
    spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
    spec.submodule_search_locations = [str(folder)]
    sys.modules[package] = importlib.util.module_from_spec(spec)
    return package


def _load_method(name: str, folder: Path) -> MethodPlugin:
    module = importlib.import_module(f"{_method_package(name, folder)}.method")
    cls = getattr(module, "Method", None)
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise TypeError("method.py must define a class named Method subclassing distrepro.api.method.Method")
    declared = cls.__dict__.get("name")
    if declared is None:
        cls.name = name  # the short name is the folder's; a plugin need not repeat it
    elif declared != name:
        raise TypeError(f"Method.name is '{declared}' but the folder is '{name}'; they must match")
    paper_file = folder / "paper.yaml"
    paper = read_yaml_mapping(paper_file, "paper.yaml", empty_ok=True) if paper_file.is_file() else {}
    if not isinstance(paper or {}, dict):
        raise TypeError("paper.yaml must be a mapping")
    readme = folder / "README.md"
    return MethodPlugin(name, folder, cls, paper or {}, readme if readme.is_file() else None)


@cache
def _discover_methods(where: tuple[Path, ...]) -> tuple[dict[str, MethodPlugin], tuple[FailedPlugin, ...]]:
    found: dict[str, MethodPlugin] = {}
    failed: list[FailedPlugin] = []
    importlib.invalidate_caches()  # a folder written since the last import (a test's tmp root) must be seen
    for name, folder in method_dirs(where).items():
        if not (folder / "method.py").is_file():
            continue
        try:
            found[name] = _load_method(name, folder)
        except Exception as exc:
            failed.append(FailedPlugin("method", name, folder, _short_error(exc)))
    return found, tuple(failed)


def methods(root: RootArg = None) -> dict[str, MethodPlugin]:
    return _discover_methods(as_roots(root))[0]


def failed_plugins(root: RootArg = None) -> list[FailedPlugin]:
    where = as_roots(root)
    return list(_discover_methods(where)[1]) + list(_discover_datasets(where)[1])


def _lookup(kind: str, name: str, found: dict[str, Any], failed: tuple[FailedPlugin, ...]) -> Any:
    if name in found:
        return found[name]
    for f in failed:
        if f.name == name:
            raise PluginError(f"{kind} '{name}' failed to load from {f.path}: {f.error}")
    hint = did_you_mean(name, found)
    raise PluginError(f"unknown {kind} '{name}'{hint} (available: {', '.join(sorted(found)) or 'none'})")


def get_method(name: str, root: RootArg = None) -> MethodPlugin:
    """The method plugin ``name``. Only its own folder is imported when it loads (a ``run`` needs one
    method, not all eleven shipped ones and their ``paper.yaml``: ~0.2 s of CPU per process); an unknown or
    failing name goes through the full discovery, whose message lists what is available or why it failed."""
    where = as_roots(root)
    try:
        plugin = _one_method(where, name)
    except Exception:  # reported below, as discovery words it (with the file and line)
        plugin = None
    return plugin if plugin is not None else _lookup("method", name, *_discover_methods(where))


@cache
def _one_method(where: tuple[Path, ...], name: str) -> MethodPlugin | None:
    """Method ``name`` alone (``None`` if no such folder); the same module and class as full discovery gives."""
    folder = method_dirs(where).get(name)  # every root is still read: a name defined twice is an error
    if folder is None or not (folder / "method.py").is_file():
        return None
    importlib.invalidate_caches()
    return _load_method(name, folder)


def plugin_module(method: str, module: str, root: RootArg = None) -> types.ModuleType:
    """A sibling module of a method plugin (``plugin_module("cadp", "solver")``), as ``method.py`` sees it.

    For tests of a plugin's helpers: the module is the very one the plugin imported, not a second copy.
    If another folder of the same name was loaded since (another root set), the plugin is loaded again.
    """
    plugin = get_method(method, root)
    loaded = sys.modules.get(plugin.cls.__module__)
    if loaded is None or getattr(loaded, "Method", None) is not plugin.cls:
        _discover_methods.cache_clear()
        _one_method.cache_clear()
        plugin = get_method(method, root)
    return importlib.import_module(f"{_method_package(plugin.name, plugin.path)}.{module}")


@cache
def _discover_datasets(where: tuple[Path, ...]) -> tuple[dict[str, types.ModuleType], tuple[FailedPlugin, ...]]:
    from distrepro.data.loading import load_dataset_plugin  # validates NAME, DESCRIPTION, Params, build

    found: dict[str, types.ModuleType] = {}
    files: dict[str, Path] = {}  # by file stem (the module name) and by NAME: both must be unique
    failed: list[FailedPlugin] = []
    for base in where:
        folder = base / "datasets"
        for path in sorted(folder.glob("*.py") if folder.is_dir() else []):
            if path.name.startswith(("_", ".")):
                continue
            if path.stem in files:
                raise defined_twice("dataset", path.stem, files[path.stem], path)
            files[path.stem] = path
            try:
                module = load_dataset_plugin(path)
            except Exception as exc:
                cause = exc.__cause__ if isinstance(exc, PluginError) and exc.__cause__ is not None else exc
                failed.append(FailedPlugin("dataset", path.stem, path, _short_error(cause)))
                continue
            name = getattr(module, "NAME", path.stem)
            if name in found:
                raise defined_twice("dataset", name, Path(found[name].__file__ or "?"), path)
            found[name] = module
    return found, tuple(failed)


def datasets(root: RootArg = None) -> dict[str, types.ModuleType]:
    return _discover_datasets(as_roots(root))[0]


def get_dataset(name: str, root: RootArg = None) -> types.ModuleType:
    return _lookup("dataset", name, *_discover_datasets(as_roots(root)))
