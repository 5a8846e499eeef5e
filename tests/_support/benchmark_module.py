"""A script of ``benchmarks/`` or ``tools/`` as a module, for the tests of its parts: the scripts are not a package
(each runs as ``python benchmarks/<name>.py``), so they are loaded from their file, registered in ``sys.modules``
first (their dataclasses look their module up there) and with their folder on the path (a script may import a
sibling)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def script_module(folder: str, name: str) -> ModuleType:
    """``<folder>/<name>.py`` of the repository, loaded as the module ``name``."""
    if str(REPO / folder) not in sys.path:
        sys.path.insert(0, str(REPO / folder))
    spec = importlib.util.spec_from_file_location(name, REPO / folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def benchmark_module(name: str) -> ModuleType:
    """``benchmarks/<name>.py``, loaded as the module ``name``."""
    return script_module("benchmarks", name)
