"""Writing a plugin (issue 11, item 7): sibling imports, typed params, user roots, the template.

* a method folder is a package: ``method.py`` imports its siblings with ``from . import x``;
* ``api.Method`` is generic over its params, so ``self.params`` is typed without casts;
* user roots (``--root``, ``DISTREPRO_PATH``) add methods, datasets and profiles to the shipped
  ones, and a name defined twice is an error naming both files;
* ``methods/_template`` runs as copied, through ``--root``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hang_guard import hang_guard

from distrepro import api
from distrepro.cli import build_parser, main
from distrepro.errors import ConfigError, PluginError
from distrepro.hardware.profiles import load_profile
from distrepro.plugins import registry, roots

REPO = Path(__file__).resolve().parents[2]
SHIPPED_METHODS = sorted(p.parent for p in REPO.glob("methods/*/method.py") if not p.parent.name.startswith("_"))

TINY: dict[str, Any] = {
    "dataset": {"name": "synthetic", "params": {"train_size": 256, "test_size": 64, "image_size": 8}},
    "model": {"name": "small_cnn", "params": {"hidden": 16}},
    "batch_size": 8,
    "budget": {"steps": 3},
    "eval": {"times": 1},
    "torch_threads": 1,
}


@pytest.fixture(autouse=True)
def shipped_roots_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped plugins and nothing else; ``--root`` exports to DISTREPRO_PATH, undone after the test.

    Each variable is set before it is deleted: ``delenv`` of an absent variable records nothing to
    undo, so what ``--root`` exported during the test would leak into the next test of the worker.
    """
    for name in (roots.ROOT_ENV, roots.PATH_ENV, "DISTREPRO_PROFILES_DIR"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


SIBLING_METHOD = """
from distrepro import api

from . import helper
from .helper import TAG


class Method(api.Method[api.MethodParams]):
    tag = TAG
    module = helper

    def train_step(self, ctx, batch):
        ctx.forward_backward(batch)
"""


# --------------------------------------------------------------------------- item 1: sibling imports


def test_a_method_imports_its_own_siblings_and_two_plugins_never_share_one(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "methods/sib_a/method.py": SIBLING_METHOD,
            "methods/sib_a/helper.py": "TAG = 'a'\n",
            "methods/sib_b/method.py": SIBLING_METHOD,
            "methods/sib_b/helper.py": "TAG = 'b'\n",  # same file name, another plugin: no collision
        },
    )
    found = registry.methods(root)
    assert registry.failed_plugins(root) == []
    assert {found["sib_a"].cls.tag, found["sib_b"].cls.tag} == {"a", "b"}
    helper = registry.plugin_module("sib_a", "helper", root)
    assert helper is found["sib_a"].cls.module  # the very module the plugin imported
    assert helper.__name__ == f"{registry.METHOD_PACKAGE}.sib_a.helper"
    assert "helper" not in sys.modules  # nothing leaks onto the top level


def test_a_missing_sibling_is_a_failed_plugin_naming_it(tmp_path: Path) -> None:
    root = write(tmp_path, {"methods/lonely/method.py": SIBLING_METHOD})
    (failed,) = registry.failed_plugins(root)
    assert failed.name == "lonely" and "helper" in failed.error


def test_shipped_helpers_are_reached_through_the_plugin_package() -> None:
    solver = registry.plugin_module("cadp", "solver")
    assert solver.__name__ == "_distrepro_methods.cadp.solver"
    assert sys.modules["_distrepro_methods.cadp.method"]._solver is solver
    rules = registry.plugin_module("chao_alloc", "allocation")
    assert sys.modules["_distrepro_methods.chao_alloc.method"].rules is rules


def test_plugin_module_stays_the_plugins_own_after_a_same_named_copy_was_loaded(tmp_path: Path) -> None:
    shutil.copytree(REPO / "methods" / "chao_alloc", tmp_path / "methods" / "chao_alloc")
    assert "chao_alloc" in registry.methods(tmp_path)  # the copy now holds _distrepro_methods.chao_alloc
    rules = registry.plugin_module("chao_alloc", "allocation")
    assert Path(rules.__file__ or "").parent == REPO / "methods" / "chao_alloc"
    assert sys.modules[registry.methods()["chao_alloc"].cls.__module__].rules is rules


@pytest.mark.parametrize(
    "path",
    [
        *(p / "method.py" for p in SHIPPED_METHODS),
        REPO / "tests/methods/test_cadp_solver.py",
        REPO / "tests/methods/test_chao.py",
    ],
    ids=lambda p: str(Path(p).relative_to(REPO)),
)
def test_no_plugin_or_plugin_test_loads_files_by_path(path: Path) -> None:
    assert "import_file" not in path.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- item 2: typed params


class _ParamsA(api.MethodParams):
    lr: float = 0.1


class _ParamsB(api.MethodParams):
    lr: float = 0.2


def test_method_is_generic_and_its_type_argument_is_its_params() -> None:
    class Typed(api.Method[_ParamsA]):
        def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None: ...

    assert Typed.Params is _ParamsA  # named once, in the class header
    assert Typed(_ParamsA()).params.lr == 0.1
    with pytest.raises(TypeError, match=r"Clash sets Params; name the params model once, as the type argument"):

        class Clash(api.Method[_ParamsA]):
            Params = _ParamsB

            def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None: ...


def test_a_loop_the_compute_charge_does_not_know_is_refused_at_class_creation() -> None:
    with pytest.raises(TypeError, match=r"Bucketed.host_syncs is 'per_layer': 'per_step' or 'per_bucket'"):

        class Bucketed(api.Method[_ParamsA]):
            host_syncs = "per_layer"  # type: ignore[assignment]

            def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None: ...


@pytest.mark.parametrize("folder", SHIPPED_METHODS, ids=lambda p: p.name)
def test_shipped_methods_are_typed_by_their_params_without_casts(folder: Path) -> None:
    plugin = registry.methods()[folder.name]
    (base,) = plugin.cls.__orig_bases__
    assert base.__args__ == (plugin.cls.Params,)
    assert "type: ignore" not in (folder / "method.py").read_text(encoding="utf-8")


@pytest.mark.slow  # about 30 s: mypy reads torch
@pytest.mark.timeout(1200)  # several minutes on a loaded machine
@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed (not a dependency)")
def test_a_type_checker_sees_each_plugins_own_params(tmp_path: Path) -> None:
    files = [str(p / "method.py") for p in SHIPPED_METHODS] + [str(REPO / "methods/_template/method.py")]
    typo = write(
        tmp_path, {"methods/typo/method.py": TEMPLATE.read_text().replace("params.momentum", "params.momentun")}
    )
    cmd = [sys.executable, "-m", "mypy", "--explicit-package-bases", "--ignore-missing-imports"]
    cmd += ["--follow-imports=silent", "--no-incremental", "--cache-dir", str(tmp_path / ".mypy")]
    ok = subprocess.run([*cmd, *files], cwd=REPO, capture_output=True, text=True, timeout=hang_guard(600))
    assert ok.returncode == 0, ok.stdout
    bad = subprocess.run(
        [*cmd, str(typo / "methods/typo/method.py")], cwd=REPO, capture_output=True, text=True, timeout=hang_guard(600)
    )
    assert '"Params" has no attribute "momentun"' in bad.stdout, bad.stdout


OUTSIDE_METHOD = """
from __future__ import annotations

import torch

from distrepro import api

from . import helper


class Params(api.MethodParams):
    inner_lr: api.PeakLR = 7e-4
    outer_lr: api.LearningRate = 0.7
    period: api.PositiveInt = helper.DEFAULT_PERIOD


class Method(api.Method[Params]):
    accepts_optimizer = True
    smoke_params = Params(period=2)

    def setup(self, ctx: api.WorkerContext) -> None:
        inner = api.OptimizerConfig(name="adamw", lr=self.params.inner_lr)
        self.inner: torch.optim.Optimizer = ctx.build_optimizer(ctx.model.parameters(), inner)
        self.outer: torch.optim.SGD = ctx.register_optimizer(torch.optim.SGD(ctx.model.parameters(), lr=1.0))
        self.first_lr = ctx.lr_schedule.lr(0) if ctx.lr_schedule is not None else None

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        ctx.forward_backward(batch)
        self.inner.step()
"""
#: the same plugin with three mistakes the surface's types catch
OUTSIDE_BROKEN = (
    OUTSIDE_METHOD.replace("ctx.model.parameters(), inner)", 'ctx.model.parameters(), "adamw")')
    .replace("lr=self.params.inner_lr)", "lr=self.params.lr)")
    .replace("ctx.lr_schedule.lr(0) if ctx.lr_schedule is not None else None", "ctx.lr_schedule.lr(0)")
)


@pytest.mark.slow  # about 30 s: mypy reads torch
@pytest.mark.timeout(1200)  # several minutes on a loaded machine
@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed (not a dependency)")
def test_mypy_checks_a_plugin_outside_the_repository_against_distrepro(tmp_path: Path) -> None:
    """A user's root, far from the checkout: mypy resolves each plugin's sibling import and types it against
    ``distrepro`` (found through MYPYPATH here, since an editable install's import hook is invisible to mypy; a
    wheel install is found through its ``py.typed``). One run, two plugins: the good one has no finding."""
    helper = "DEFAULT_PERIOD = 500\n"
    root = write(
        tmp_path / "mine",
        {
            "methods/diloco/method.py": OUTSIDE_METHOD,
            "methods/diloco/helper.py": helper,
            "methods/diloco_bad/method.py": OUTSIDE_BROKEN,
            "methods/diloco_bad/helper.py": helper,
        },
    )
    cmd = [sys.executable, "-m", "mypy", "--explicit-package-bases", "--follow-imports=silent"]
    cmd += ["--cache-dir", str(tmp_path / ".mypy"), "methods"]
    env = {**os.environ, "MYPYPATH": str(REPO)}
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=hang_guard(1100))
    findings = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert findings and all(line.startswith("methods/diloco_bad/method.py:") for line in findings), done.stdout
    out = done.stdout
    assert 'Argument 2 to "build_optimizer" of "WorkerContext" has incompatible type "str"' in out, out
    assert '"Params" has no attribute "lr"' in out, out
    assert 'Item "None" of "LRSchedule | None" has no attribute "lr"' in out, out
    assert len(findings) == 3, out


# --------------------------------------------------------------------------- item 3: user roots


def user_root(base: Path, method: str = "user_m", dataset: str = "user_ds", profile: str = "user-4") -> Path:
    """A root outside the repository with one method, one dataset and one profile."""
    synthetic = (REPO / "datasets" / "synthetic.py").read_text(encoding="utf-8")
    prof = yaml.safe_load((REPO / "hardware_profiles" / "homogeneous-4.yaml").read_text(encoding="utf-8"))
    prof["name"] = profile
    return write(
        base,
        {
            f"methods/{method}/method.py": "from distrepro import api\n\n\n" + SIMPLE_METHOD,
            f"datasets/{dataset}.py": re.sub(r"^NAME\b.*$", f'NAME = "{dataset}"', synthetic, flags=re.M),
            f"hardware_profiles/{profile}.yaml": yaml.safe_dump(prof),
        },
    )


SIMPLE_METHOD = """class Method(api.Method[api.MethodParams]):
    def train_step(self, ctx, batch):
        ctx.forward_backward(batch)
"""


def test_a_user_root_adds_to_the_shipped_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = user_root(tmp_path / "mine")
    monkeypatch.setenv(roots.PATH_ENV, str(root))
    assert roots.roots() == (roots.shipped_root(), root.resolve())
    methods = registry.methods()
    assert {"ar_sgd", "cadp", "user_m"} <= set(methods) and methods["user_m"].cls.name == "user_m"
    assert {"synthetic", "user_ds"} <= set(registry.datasets())
    assert {"homogeneous-4", "user-4"} <= set(roots.profile_names())
    assert load_profile("user-4").world_size == 4


@pytest.mark.parametrize(
    ("kwargs", "kind", "clash"),
    [
        ({"method": "ar_sgd"}, "method", "methods/ar_sgd"),
        ({"dataset": "synthetic"}, "dataset", "datasets/synthetic.py"),
        ({"profile": "homogeneous-4"}, "hardware profile", "hardware_profiles/homogeneous-4.yaml"),
    ],
)
def test_a_name_defined_twice_is_an_error_naming_both_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, str], kind: str, clash: str
) -> None:
    root = user_root(tmp_path / "mine", **kwargs)
    monkeypatch.setenv(roots.PATH_ENV, str(root))
    lookup = {"method": registry.methods, "dataset": registry.datasets, "hardware profile": roots.profile_names}
    with pytest.raises(PluginError, match=f"{kind} '.*' is defined twice") as info:
        lookup[kind]()
    assert str(REPO / clash) in str(info.value) and str(root.resolve() / clash) in str(info.value)


def test_a_bad_root_is_one_line_naming_where_it_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["list", "--root", str(tmp_path / "nope")]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"distrepro: error: --root: plugin root '{tmp_path / 'nope'}' is not a folder"
    )
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv(roots.PATH_ENV, str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match=r"^DISTREPRO_PATH: plugin root .* holds none of methods/, datasets/"):
        roots.roots()


def test_a_relative_config_not_found_here_is_taken_from_the_roots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distrepro.cli.common import config_path as _config_path

    root = write(tmp_path / "mine", {"configs/mine.yaml": "method: ar_sgd\n"})
    monkeypatch.setenv(roots.PATH_ENV, str(root))
    monkeypatch.chdir(tmp_path)
    assert _config_path("configs/quickstart.yaml") == str(REPO / "configs" / "quickstart.yaml")
    assert _config_path("configs/mine.yaml") == str(root.resolve() / "configs" / "mine.yaml")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "mine.yaml").write_text("method: local_sgd\n")
    assert _config_path("configs/mine.yaml") == "configs/mine.yaml"  # the folder you are in comes first
    with pytest.raises(
        ConfigError, match=r"configs/mine\.yamll: run config not found; did you mean 'configs/mine\.yaml'\?"
    ):
        _config_path("configs/mine.yamll")  # found nowhere: one line with the closest config of the roots
    (tmp_path / "configs" / "dangling.yaml").symlink_to(tmp_path / "gone.yaml")
    assert _config_path("configs/dangling.yaml") == "configs/dangling.yaml"  # left to load_config's own error


@pytest.mark.parametrize(
    "argv",
    [["run", "c.yaml"], ["list"], ["reproduce", "p"], ["report", "p"], ["extras", "p", "arm"]],
    ids=lambda a: a[0],
)
def test_every_command_that_looks_plugins_up_takes_root(argv: list[str]) -> None:
    args = build_parser().parse_args([*argv, "--root", "a", "--root", "b"])
    assert args.root == ["a", "b"]


def test_list_with_roots_shows_user_plugins_and_exports_them_for_child_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first = user_root(tmp_path / "one")
    second = user_root(tmp_path / "two", method="other_m", dataset="other_ds", profile="other-4")
    assert main(["list", "--root", f"{first}{os.pathsep}{second}"]) == 0
    out = capsys.readouterr().out
    for name in ("user_m", "other_m", "user_ds", "other_ds", "user-4", "other-4", "cadp", "chao_alloc"):
        assert re.search(rf"^\s+{re.escape(name)}\s", out, re.M), name
    # ranks of the distributed engine are new processes: they find the same roots through the environment
    assert os.environ[roots.PATH_ENV].split(os.pathsep) == [str(first.resolve()), str(second.resolve())]


# --------------------------------------------------------------------------- item 5: the template

TEMPLATE = REPO / "methods" / "_template" / "method.py"


def copy_template(root: Path, name: str) -> Path:
    folder = root / "methods" / name
    shutil.copytree(TEMPLATE.parent, folder)
    paper = folder / "paper.yaml"
    paper.write_text(paper.read_text(encoding="utf-8").replace("_template", name), encoding="utf-8")
    return folder


def test_the_template_is_never_discovered_itself() -> None:
    assert "_template" not in registry.methods() and not any(f.name == "_template" for f in registry.failed_plugins())


@pytest.mark.smoke
def test_a_copy_of_the_template_runs_through_root(
    tmp_path: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "plugins"
    copy_template(root, "my_method")
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "name": "template", "method": "my_method"}), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(config), "--root", str(root), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"seed 0: val_acc [0-9.]+ .* run [0-9a-f]{32}", out), out
    # its paper.yaml is found through the same root and validates (arms name the new folder)
    assert main(["extras", "my-paper", "mine", "ddp", "--root", str(root)]) == 0
    from distrepro.claims.papers import find_paper

    info = find_paper("my-paper")
    assert info.path == root.resolve() / "methods" / "my_method" / "paper.yaml"
    assert info.spec is not None and [c.id for c in info.spec.claims] == ["C1", "C2"]


@pytest.mark.distributed
def test_ranks_of_the_distributed_engine_find_plugins_given_by_root(
    tmp_path: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each rank is a new process that looks the method and profile up by name: ``--root`` must reach it."""
    root = tmp_path / "plugins"
    copy_template(root, "my_dist_method")
    prof = yaml.safe_load((REPO / "hardware_profiles" / "chao-1m-1to2.yaml").read_text(encoding="utf-8"))
    write(root, {"hardware_profiles/my-pair.yaml": yaml.safe_dump({**prof, "name": "my-pair"})})
    run = {**TINY, "name": "template-dist", "method": "my_dist_method", "profile": "my-pair", "engine": "dist"}
    config = tmp_path / "dist.yaml"
    config.write_text(yaml.safe_dump({**run, "dist": {"timeout_s": 60}}), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(config), "--root", str(root), "--no-progress"]) == 0, capsys.readouterr().err
    assert re.search(r"seed 0: val_acc [0-9.]+ .* run [0-9a-f]{32}", capsys.readouterr().out)


def test_the_writing_a_method_doc_walks_the_three_files_in_order() -> None:
    doc = (REPO / "docs" / "writing-a-method.md").read_text(encoding="utf-8")
    positions = [doc.find(f"`{name}`") for name in ("method.py", "paper.yaml", "README.md")]
    assert -1 not in positions and positions == sorted(positions)
    for topic in ("harness owns", "method owns", "ctx.comm", "ctx.forward_backward", "--root", "claims"):
        assert topic in doc, topic
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "docs/writing-a-method.md" in readme and "methods/_template" in readme and "--root" in readme
