"""The repo's noxfile as a module, loaded once per test process: each load registers its sessions with nox
again (nox warns that this will become an error), so every test that reads it shares this one."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def noxfile_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("distrepro_noxfile", REPO / "noxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
