"""Packaging: ranges in pyproject.toml, a lock that matches them, sessions that use it, and a container recipe.

The container test builds the CPU image and runs one C-ADP arm for one seed in it; it runs only where a
docker daemon answers (not on the development machine), and is ``slow``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
UV = shutil.which("uv")


def _docker_works() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=False).returncode == 0


def test_runtime_dependencies_are_ranges_and_dev_tools_a_group() -> None:
    deps = {re.split(r"[<>=!~ \[]", d, maxsplit=1)[0]: d for d in PYPROJECT["project"]["dependencies"]}
    for name in ("torch", "torchvision", "mlflow", "scipy"):
        assert name in deps and "==" not in deps[name], deps.get(name)
    test_extra = " ".join(PYPROJECT["project"]["optional-dependencies"]["test"])
    dev = " ".join(PYPROJECT["dependency-groups"]["dev"])
    for tool in ("ruff", "mypy"):  # lint only
        assert tool in dev and tool not in test_extra, tool
    for tool in ("nox", "import-linter"):  # lint runs them, and tests import them (the noxfile, grimp's graph)
        assert tool in dev and tool in test_extra, tool
    assert any(c.startswith("Programming Language :: Python :: 3.11") for c in PYPROJECT["project"]["classifiers"])
    # a plugin author's tools from a wheel: `distrepro test` runs pytest, the guide's type-check line runs mypy
    dev_extra = " ".join(PYPROJECT["project"]["optional-dependencies"]["dev"])
    assert "pytest" in dev_extra and "mypy" in dev_extra


#: hosts and path parts that mark an address someone meant to fill in later
_PLACEHOLDER = re.compile(r"example\.(com|org)|localhost|your[-_]?(org|name|user)|<[^>]*>|TODO|xxx|owner/repo", re.I)


def test_project_urls_are_real_addresses_or_absent() -> None:
    """``[project.urls]`` is shown by pip/PyPI as the project's own pages: an address that does not exist (a
    guessed repository, a placeholder) misleads every reader, so the table stays out until the pages exist, and
    says so in a comment."""
    urls = PYPROJECT["project"].get("urls", {})
    for name, url in urls.items():
        assert re.fullmatch(r"https://[a-z0-9.-]+\.[a-z]{2,}(/\S*)?", url), (name, url)
        assert not _PLACEHOLDER.search(url), (name, url)
    if not urls:
        text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
        assert "No [project.urls] on purpose" in text  # the reason stays beside the metadata it is about


@pytest.mark.skipif(UV is None, reason="uv not installed")
def test_the_committed_lock_matches_pyproject() -> None:
    proc = subprocess.run([UV, "lock", "--check", "--offline"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lock = (ROOT / "uv.lock").read_text(encoding="utf-8")
    assert re.search(r'name = "torch"\nversion = "2\.13\.0"', lock) and 'name = "mlflow"\nversion = "3.17.2"' in lock


def test_sessions_install_from_the_lock_with_compiled_bytecode() -> None:
    nox_text = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert '"uv", "export", "--locked"' in nox_text and '"--compile-bytecode", *_constraints(session)' in nox_text
    # uv compiles site-packages only: the editable checkout's packages are compiled by the session itself
    assert '"compileall", "-q", *SOURCE_DIRS' in nox_text
    from noxmodule import noxfile_module

    dirs = noxfile_module().SOURCE_DIRS  # the package and the plugin folders a run imports from the checkout
    assert set(dirs) == {"distrepro", "methods", "datasets"} and all(any((ROOT / d).rglob("*.py")) for d in dirs)
    docker = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "UV_COMPILE_BYTECODE=1" in docker and "uv export --locked" in docker
    assert 'CMD ["distrepro", "reproduce", "cadp"' in docker


@pytest.mark.slow
@pytest.mark.skipif(not _docker_works(), reason="no docker daemon here")
def test_the_cpu_image_reproduces_one_cadp_arm(tmp_path: Path) -> None:
    tag = "distrepro-test:cpu"
    subprocess.run(["docker", "build", "-t", tag, str(ROOT)], check=True, timeout=3600)
    out = subprocess.run(
        ["docker", "run", "--rm", "-v", f"{tmp_path}:/work", tag,
         "distrepro", "reproduce", "cadp", "--arms", "cadp", "--seeds", "0", "--no-progress"],
        capture_output=True, text=True, timeout=3600, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "mlflow.db").is_file() and (tmp_path / "reports" / "cadp" / "report.html").is_file()
