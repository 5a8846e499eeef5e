"""Build hook: ship the plugin folders inside the wheel, under ``distrepro/_shipped``.

``methods/``, ``datasets/``, ``hardware_profiles/`` and ``configs/`` are plain folders of the
checkout, not Python packages, and the project wants them there (plugins are found from folders,
benchopt-style). A non-editable ``pip install`` would leave them behind, so the wheel build copies
them into the package, where :func:`distrepro.plugins.roots.shipped_root` finds them. Nothing is copied
for an editable install: it reads them from the checkout. Everything else is in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
SHIPPED = ("methods", "datasets", "hardware_profiles", "configs")  # = distrepro.plugins.roots.PLUGIN_DIRS


class BuildWithPlugins(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "distrepro" / "_shipped"
        for name in SHIPPED:
            if (HERE / name).is_dir():
                shutil.copytree(
                    HERE / name,
                    target / name,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"),
                    dirs_exist_ok=True,
                )


setup(cmdclass={"build_py": BuildWithPlugins})
