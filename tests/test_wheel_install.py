"""A non-editable install finds the shipped plugins (issue 11, item 7).

The plugin folders (``methods/``, ``datasets/``, ``hardware_profiles/``, ``configs/``) are not Python
packages; ``setup.py`` copies them into the wheel under ``distrepro/_shipped``. This builds the sdist and,
from it, the wheel (as ``uv build`` does, so ``MANIFEST.in`` is checked too), installs the wheel
without dependencies into a fresh virtualenv that borrows this interpreter's site-packages for them
(through a ``.pth`` line, which does not run the editable install's import hook), and runs the
installed ``distrepro`` from a folder outside the checkout.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
UV = shutil.which("uv")

pytestmark = [
    pytest.mark.skipif(UV is None, reason="needs uv to build and install the wheel"),
    pytest.mark.skipif(importlib.util.find_spec("setuptools") is None, reason="needs setuptools (the build backend)"),
]


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{' '.join(cmd)}\n{out.stdout}\n{out.stderr}"
    return out.stdout


def test_installed_wheel_lists_and_uses_the_shipped_plugins_from_another_folder(tmp_path: Path) -> None:
    assert UV is not None
    dist = tmp_path / "dist"
    # no build isolation: the backend comes from this environment, so no index is needed
    _run([UV, "build", "--no-build-isolation", "--python", sys.executable, "-o", str(dist), str(REPO)], REPO)
    (wheel,) = dist.glob("distrepro-*.whl")
    venv = tmp_path / "venv"
    _run([UV, "venv", "-q", "--python", sys.executable, str(venv)], tmp_path)
    python = venv / "bin" / "python"
    _run([UV, "pip", "install", "-q", "--no-deps", "--python", str(python), str(wheel)], tmp_path)
    site = Path(
        _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path).strip()
    )
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_distrepro_test_deps.pth").write_text("\n".join(sorted(deps)) + "\n", encoding="utf-8")

    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISTREPRO_", "PYTHON"))}
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    where = _run(
        [str(python), "-c", "import distrepro.plugins.roots as r; print(r.__file__); print(r.shipped_root())"],
        cwd,
        env,
    )
    module, shipped = where.split()
    assert Path(module).is_relative_to(site) and Path(shipped) == site / "distrepro" / "_shipped"

    out = _run([str(venv / "bin" / "distrepro"), "list"], cwd, env)
    methods = out.split("methods:")[1].split("datasets:")[0]
    for name in ("cadp", "chao_alloc", "ar_sgd"):
        assert f"  {name} " in methods, out
    assert "synthetic" in out.split("datasets:")[1] and "homogeneous-4" in out.split("hardware profiles:")[1]
    assert "failed to load" not in out and "INVALID" not in out
    # paper.yaml and its arms' configs come from the package too
    assert _run([str(venv / "bin" / "distrepro"), "extras", "cadp", "deepspeed_real"], cwd, env).split() == [
        "deepspeed"
    ]
