"""Every discovered method plugin, benchopt-style: a tiny campaign that must learn and be logged.

The campaign runs the method's ``smoke_params`` (``api.Method.smoke_params``: values that make periodic logic
run within its 10 steps), else its defaults.

The test is generated from :func:`distrepro.plugins.registry.methods`, so a new ``methods/<name>/`` gets it
without being listed anywhere. The checks themselves ship in the package (:mod:`distrepro.conformance.checks`),
so ``distrepro test METHOD`` runs them from an installed wheel. Broken plugins are reported by the registry instead
of crashing it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from distrepro import api
from distrepro.conformance import checks
from distrepro.errors import PluginError
from distrepro.plugins import registry


@pytest.fixture
def tracking(mlflow_uri: str, migrated_mlflow_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's private store (``mlflow_uri``), pre-migrated; the cwd is a scratch folder."""
    db = Path(mlflow_uri.removeprefix("sqlite:///"))
    shutil.copyfile(migrated_mlflow_db, db)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return mlflow_uri


@pytest.mark.smoke
@pytest.mark.parametrize("name", sorted(registry.methods()))
def test_method_smoke_campaign(name: str, tracking: str) -> None:
    checks.smoke_campaign(name, tracking)


#: generated cases that fail today, found by these tests: strict xfails, so a fix is noticed
KNOWN_BROKEN: dict[str, str] = {}


@pytest.mark.distributed
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_BROKEN[n], strict=True)) if n in KNOWN_BROKEN else n
        for n in sorted(n for n, p in registry.methods().items() if p.cls.synchronous)
    ],
)
def test_method_resumes_from_a_checkpoint_to_the_uninterrupted_run(
    name: str, tracking: str, profiles: Path, tmp_path: Path
) -> None:
    """:func:`distrepro.conformance.checks.checkpoint_round_trip` on the test profiles' ``pair-2``."""
    checks.checkpoint_round_trip(name, tracking, tmp_path / "ckpt", profile="pair-2")


def test_a_checkpoint_failure_names_the_tensors_and_the_unsaved_attributes() -> None:
    """What the round trip says when it fails: which model tensors differ, by how much, and which of the method's
    tensor-holding attributes its ``state_dict`` leaves out (the default skips them all)."""
    clean, resumed = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    resumed.load_state_dict(clean.state_dict())
    with torch.no_grad():
        resumed.bias.add_(0.5)
    assert checks.differing_tensors(resumed, clean) == ["bias (max |diff| 0.5)"]

    class Probe(api.Method[api.MethodParams]):
        def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None: ...

    probe = Probe(api.MethodParams())
    probe.snapshot = [torch.zeros(2)]  # type: ignore[attr-defined]
    probe.momentum = {"w": torch.ones(1)}  # type: ignore[attr-defined]
    probe.steps = 3  # type: ignore[attr-defined]
    assert checks.unsaved_tensor_attributes(probe) == ["momentum", "snapshot"]


@pytest.mark.smoke
def test_shipped_plugins_all_load() -> None:
    assert {"ar_sgd", "local_sgd", "gossip"} <= set(registry.methods())
    assert registry.failed_plugins() == []
    for name, plugin in registry.methods().items():
        assert plugin.cls.name == name  # the short name is the plugin folder's


GOOD_METHOD = """
from distrepro import api


class Method(api.Method):
    name = "tmp_ok_method"

    def train_step(self, ctx, batch):
        ctx.forward_backward(batch)
"""


def make_root(tmp_path: Path) -> Path:
    """A repository root with one good, one broken and one malformed method, and a broken dataset."""
    root = tmp_path / "repo"
    files = {
        "methods/tmp_ok_method/method.py": GOOD_METHOD,
        "methods/tmp_broken/method.py": "raise RuntimeError('broken on purpose')\n",
        "methods/tmp_no_class/method.py": "Method = 42\n",
        "methods/_private/method.py": "raise RuntimeError('never imported')\n",
        "methods/tmp_no_file/README.md": "a folder without method.py is not a plugin\n",
        "datasets/tmp_bad_ds.py": "import this_module_does_not_exist_anywhere\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.mark.smoke
def test_failed_plugins_are_reported_not_raised(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    assert sorted(registry.methods(root)) == ["tmp_ok_method"]
    failed = {(f.kind, f.name): f for f in registry.failed_plugins(root)}
    assert sorted(failed) == [("dataset", "tmp_bad_ds"), ("method", "tmp_broken"), ("method", "tmp_no_class")]

    broken = failed[("method", "tmp_broken")]
    assert broken.path == root / "methods" / "tmp_broken"
    assert broken.error.startswith("RuntimeError: broken on purpose")
    assert "method.py:1" in broken.error
    assert "must define a class named Method" in failed[("method", "tmp_no_class")].error
    assert failed[("dataset", "tmp_bad_ds")].error.startswith("ModuleNotFoundError")

    with pytest.raises(PluginError, match=r"method 'tmp_broken' failed to load from .*broken on purpose"):
        registry.get_method("tmp_broken", root)
    with pytest.raises(PluginError, match=r"unknown method 'nope' \(available: tmp_ok_method\)"):
        registry.get_method("nope", root)
    assert registry.datasets(root) == {}


def test_a_run_imports_only_its_own_method_and_errors_still_name_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``get_method`` (what a ``run`` calls) imports the named plugin alone (start-up: not every shipped method and
    its paper.yaml), the very class full discovery gives; a failing or unknown name says what discovery says."""
    import sys

    root = make_root(tmp_path)
    for key in [k for k in sys.modules if k.startswith(f"{registry.METHOD_PACKAGE}.tmp_no_class")]:
        monkeypatch.delitem(sys.modules, key)
    plugin = registry.get_method("tmp_ok_method", root)
    assert f"{registry.METHOD_PACKAGE}.tmp_no_class.method" not in sys.modules  # a sibling plugin, not imported
    assert plugin.cls is registry.methods(root)["tmp_ok_method"].cls
    assert f"{registry.METHOD_PACKAGE}.tmp_no_class.method" in sys.modules  # discovery (distrepro list) imports all
    fresh = make_root(tmp_path / "again")  # errors on a root nothing was discovered in yet
    with pytest.raises(PluginError, match=r"method 'tmp_broken' failed to load from .*broken on purpose"):
        registry.get_method("tmp_broken", fresh)
    with pytest.raises(PluginError, match="must define a class named Method"):
        registry.get_method("tmp_no_class", fresh)
    with pytest.raises(PluginError, match=r"unknown method 'nope' \(available: tmp_ok_method\)"):
        registry.get_method("nope", fresh)
