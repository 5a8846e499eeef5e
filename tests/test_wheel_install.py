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
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest
from hang_guard import hang_guard

REPO = Path(__file__).resolve().parents[1]
UV = shutil.which("uv")

pytestmark = [
    pytest.mark.skipif(UV is None, reason="needs uv to build and install the wheel"),
    pytest.mark.skipif(importlib.util.find_spec("setuptools") is None, reason="needs setuptools (the build backend)"),
]


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=hang_guard(300))
    assert out.returncode == 0, f"{' '.join(cmd)}\n{out.stdout}\n{out.stderr}"
    return out.stdout


@dataclass(frozen=True)
class Installed:
    """The wheel installed into a fresh virtualenv, and a folder outside the checkout to run it from."""

    venv: Path
    site: Path
    cwd: Path
    env: dict[str, str]

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def distrepro(self, *args: str) -> str:
        return _run([str(self.venv / "bin" / "distrepro"), *args], self.cwd, self.env)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    assert UV is not None
    tmp_path = tmp_path_factory.mktemp("wheel")
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
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env["HOME"] = str(tmp_path / "home")
    return Installed(venv, site, cwd, env)


def test_installed_wheel_lists_and_uses_the_shipped_plugins_from_another_folder(installed: Installed) -> None:
    where = _run(
        [str(installed.python), "-c", "import distrepro.plugins.roots as r; print(r.__file__, r.shipped_root())"],
        installed.cwd,
        installed.env,
    )
    module, shipped = where.split()
    site = installed.site
    assert Path(module).is_relative_to(site) and Path(shipped) == site / "distrepro" / "_shipped"

    out = installed.distrepro("list")
    methods = out.split("methods:")[1].split("datasets:")[0]
    for name in ("cadp", "chao_alloc", "ar_sgd"):
        assert f"  {name} " in methods, out
    assert "synthetic" in out.split("datasets:")[1] and "homogeneous-4" in out.split("hardware profiles:")[1]
    assert "failed to load" not in out and "INVALID" not in out
    # paper.yaml and its arms' configs come from the package too
    assert installed.distrepro("extras", "cadp", "deepspeed_real").split() == ["deepspeed"]


@pytest.mark.slow  # a tiny campaign and the checkpoint round trip on two ranks: about a minute on a quiet machine
@pytest.mark.distributed
@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="needs mypy (the dev extra)")
def test_a_newcomer_adds_an_outside_method_tests_and_type_checks_it_from_the_wheel(installed: Installed) -> None:
    """What the guide tells a plugin author with no checkout: copy the template out of the installed package,
    run its generated tests (``distrepro test``, the checks shipped in the wheel) and type-check it (mypy against
    the wheel's ``py.typed`` ``distrepro.api``)."""
    template = _run(
        [
            str(installed.python),
            "-c",
            "from distrepro.plugins.roots import shipped_root; print(shipped_root() / 'methods' / '_template')",
        ],
        installed.cwd,
        installed.env,
    ).strip()
    assert Path(template).is_relative_to(installed.site)
    root = installed.cwd / "plugins"
    shutil.copytree(template, root / "methods" / "my_method")
    paper = root / "methods" / "my_method" / "paper.yaml"
    paper.write_text(paper.read_text(encoding="utf-8").replace("_template", "my_method"), encoding="utf-8")

    out = installed.distrepro("test", "my_method", "--root", str(root))
    assert re.search(r"\b2 passed", out), out  # the smoke campaign and the checkpoint round trip
    method = str(root / "methods" / "my_method" / "method.py")
    mypy = [str(installed.python), "-m", "mypy", "--explicit-package-bases", method]
    typed = _run(mypy, installed.cwd, installed.env)
    assert "Success: no issues found" in typed, typed
