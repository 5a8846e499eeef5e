"""Plugin discovery: methods, datasets and hardware profiles are found from their folders.

As in benchopt, there is nothing to register: a folder ``methods/<name>/`` with a ``method.py``
defining ``Method`` is a method; ``datasets/<name>.py`` is a dataset; ``hardware_profiles/
<name>.yaml`` is a profile. Plugin files are imported *by path* under private module names
(``_distrepro_methods.<name>``), so the top-level ``datasets/`` folder never shadows Hugging
Face's ``datasets`` package. A plugin that fails to import is reported with its error
(:class:`FailedPlugin`), not a crash, so ``distrepro list`` and the tests can show it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
import types
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from suite.api import Method
from suite.errors import PluginError


def repo_root() -> Path:
    """The distrepro checkout: ``DISTREPRO_ROOT`` or the folder above the ``suite`` package."""
    env = os.environ.get("DISTREPRO_ROOT")
    return Path(env).resolve() if env else Path(__file__).resolve().parents[1]


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
    cls: type[Method]
    paper: dict[str, Any]  # contents of paper.yaml ({} if absent)
    readme: Path | None

    @property
    def paper_id(self) -> str | None:
        """The paper this method reproduces (``paper.yaml: kind: reproduction``), else None."""
        if self.paper.get("kind") == "reproduction":
            cite = self.paper.get("citation") or {}
            return cite.get("id")
        return None


def import_file(path: Path, module_name: str) -> types.ModuleType:
    """Import a Python file under ``module_name`` (kept in sys.modules for pickling/dataclasses)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def _short_error(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" ({Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


@cache
def _discover_methods(root: Path) -> tuple[dict[str, MethodPlugin], tuple[FailedPlugin, ...]]:
    found: dict[str, MethodPlugin] = {}
    failed: list[FailedPlugin] = []
    for folder in sorted((root / "methods").iterdir() if (root / "methods").is_dir() else []):
        if not folder.is_dir() or folder.name.startswith(("_", ".")) or not (folder / "method.py").is_file():
            continue
        name = folder.name
        try:
            module = import_file(folder / "method.py", f"_distrepro_methods.{name}")
            cls = getattr(module, "Method", None)
            if not (isinstance(cls, type) and issubclass(cls, Method)):
                raise TypeError("method.py must define a class named Method subclassing suite.api.Method")
            paper_file = folder / "paper.yaml"
            paper = yaml.safe_load(paper_file.read_text()) if paper_file.is_file() else {}
            if not isinstance(paper or {}, dict):
                raise TypeError("paper.yaml must be a mapping")
            readme = folder / "README.md"
            found[name] = MethodPlugin(name, folder, cls, paper or {}, readme if readme.is_file() else None)
        except Exception as exc:
            failed.append(FailedPlugin("method", name, folder, _short_error(exc)))
    return found, tuple(failed)


def methods(root: Path | None = None) -> dict[str, MethodPlugin]:
    return _discover_methods(root or repo_root())[0]


def failed_plugins(root: Path | None = None) -> list[FailedPlugin]:
    root = root or repo_root()
    return list(_discover_methods(root)[1]) + list(_discover_datasets(root)[1])


def _lookup(kind: str, name: str, found: dict[str, Any], failed: tuple[FailedPlugin, ...]) -> Any:
    if name in found:
        return found[name]
    for f in failed:
        if f.name == name:
            raise PluginError(f"{kind} '{name}' failed to load from {f.path}: {f.error}")
    raise PluginError(f"unknown {kind} '{name}'; available: {', '.join(sorted(found)) or 'none'}")


def get_method(name: str, root: Path | None = None) -> MethodPlugin:
    return _lookup("method", name, *_discover_methods(root or repo_root()))


@cache
def _discover_datasets(root: Path) -> tuple[dict[str, types.ModuleType], tuple[FailedPlugin, ...]]:
    found: dict[str, types.ModuleType] = {}
    failed: list[FailedPlugin] = []
    folder = root / "datasets"
    for path in sorted(folder.glob("*.py") if folder.is_dir() else []):
        if path.name.startswith(("_", ".")):
            continue
        try:
            from suite.data import load_dataset_plugin  # validates NAME, DESCRIPTION, Params, build

            module = load_dataset_plugin(path)
            found[getattr(module, "NAME", path.stem)] = module
        except Exception as exc:
            cause = exc.__cause__ if isinstance(exc, PluginError) and exc.__cause__ is not None else exc
            failed.append(FailedPlugin("dataset", path.stem, path, _short_error(cause)))
    return found, tuple(failed)


def datasets(root: Path | None = None) -> dict[str, types.ModuleType]:
    return _discover_datasets(root or repo_root())[0]


def get_dataset(name: str, root: Path | None = None) -> types.ModuleType:
    return _lookup("dataset", name, *_discover_datasets(root or repo_root()))


def profile_names(root: Path | None = None) -> list[str]:
    folder = (root or repo_root()) / "hardware_profiles"
    return sorted(p.stem for p in folder.glob("*.yaml") if p.stem != "workloads")
