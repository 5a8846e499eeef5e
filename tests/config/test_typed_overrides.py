"""Seeds and overrides travel typed from the command line to the config: ``--seeds 0-4`` is the ints 0..4 and a
``--set`` value is read once, never formatted to text and read as YAML again (which turned a string that looks
like a number into one, and a float into whatever its text read back as)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clirun import write_config

from distrepro.cli import main
from distrepro.config import overrides as overrides_module
from distrepro.config import run_config
from distrepro.config.overrides import Override, apply_overrides, parse_override, parse_overrides
from distrepro.config.run_config import load_config
from distrepro.errors import ConfigError

pytestmark = pytest.mark.smoke


class _Stop(BaseException):
    """Raised by a spy once it has seen its call: the command goes no further (no training, no store)."""


def _no_yaml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail on any YAML read of an override value: typed values must not need one."""

    def refuse(text: str, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"an override value was read as YAML again: {text!r}")

    monkeypatch.setattr(overrides_module, "load_yaml", refuse)


def test_seeds_given_as_a_range_reach_load_config_as_ints(
    tmp_path: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def spy(path: Any, overrides: Any = (), seeds: Any = None) -> Any:
        seen.update(overrides=list(overrides), seeds=seeds)
        raise _Stop

    monkeypatch.setattr(run_config, "load_config", spy)
    with pytest.raises(_Stop):
        main(["run", str(write_config(tmp_path)), "--seeds", "0-4", "--engine", "inprocess"])
    assert seen["seeds"] == [0, 1, 2, 3, 4] and all(type(s) is int for s in seen["seeds"])
    assert all(o.path != ("seeds",) for o in seen["overrides"])  # not an override whose text YAML reads back
    assert seen["overrides"] == [Override(("engine",), "inprocess")]


def test_typed_seeds_are_the_config_seeds_without_a_yaml_round_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_yaml(monkeypatch)
    cfg = load_config(write_config(tmp_path, seeds=[7]), seeds=(0, 1, 2, 3, 4))
    assert cfg.seeds == [0, 1, 2, 3, 4] and all(type(s) is int for s in cfg.seeds)


def test_reproduce_seeds_reach_the_reproduction_as_a_tuple_of_ints(
    mlflow_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distrepro.reproduction import reproduce as reproduce_module

    seen: dict[str, Any] = {}

    def spy(paper: str, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise _Stop

    monkeypatch.setattr(reproduce_module, "reproduce", spy)
    with pytest.raises(_Stop):
        main(["reproduce", "chao", "--seeds", "0-2,5", "--set", "method_params.tag='007'"])
    assert seen["seeds"] == (0, 1, 2, 5) and all(type(s) is int for s in seen["seeds"])
    assert seen["overrides"] == [Override(("method_params", "tag"), "007")]
    assert seen["overrides"][0].text == "method_params.tag='007'"  # what the umbrella records for a resume


@pytest.mark.parametrize("command", ["run", "reproduce"])
@pytest.mark.parametrize("spec", ["1e3", "0x10", "true", "0-1e3"])
def test_a_seed_spec_yaml_would_read_as_a_number_is_refused_naming_the_flag(
    tmp_path: Path, mlflow_uri: str, capsys: pytest.CaptureFixture[str], command: str, spec: str
) -> None:
    target = str(write_config(tmp_path)) if command == "run" else "chao"
    assert main([command, target, "--seeds", spec]) == 2
    err = capsys.readouterr().err
    assert "--seeds" in err and "is not a seed index" in err and "Traceback" not in err, err


def test_an_override_value_keeps_its_type(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _no_yaml(monkeypatch)
    sets = [
        Override(("method_params", "lr"), 1e-05),
        Override(("dataset", "params", "tag"), "1e3"),  # a string that YAML 1.2 would read as the float 1000.0
        Override(("dataset", "params", "ids"), [1, 2]),
        Override(("name",), "0x10"),  # YAML: the int 16, refused as a name
        Override(("budget", "epochs"), 0.5),  # a new budget unit replaces the config's steps
    ]
    cfg = load_config(write_config(tmp_path), sets)
    assert cfg.method_params == {"lr": 1e-05} and type(cfg.method_params["lr"]) is float
    assert cfg.dataset.params["tag"] == "1e3" and type(cfg.dataset.params["tag"]) is str
    assert cfg.dataset.params["ids"] == [1, 2] and cfg.name == "0x10"
    assert cfg.budget.unit == "epochs" and cfg.budget.epochs == 0.5


def test_a_set_text_is_parsed_once_into_a_typed_override() -> None:
    assert parse_override("budget.steps=50") == Override(("budget", "steps"), 50)
    assert parse_override("method_params.lr=1e-3").value == 0.001
    assert parse_override("method_params.tag='1e3'").value == "1e3"
    assert parse_override("name=") == Override(("name",), "")
    with pytest.raises(ConfigError, match="--set"):
        parse_override("budget.steps")


def test_an_arm_params_value_is_handed_on_as_paper_yaml_typed_it() -> None:
    from distrepro.reproduction.selection import param_overrides

    params = {"lr": 1e-05, "topology": "ring", "sizes": {"a": [1, 2]}}
    assert param_overrides(params) == [Override(("method_params", k), v) for k, v in params.items()]
    data = apply_overrides({}, param_overrides(params))
    data["method_params"]["sizes"]["a"].append(3)  # the config's copy, not the paper's
    assert params["sizes"] == {"a": [1, 2]}


def test_overrides_recorded_for_a_resume_read_back_the_same() -> None:
    from distrepro.reproduction.resume import OVERRIDES_TAG, SEEDS_TAG, start_tags

    given = [*parse_overrides(["budget.steps=3", "method_params.tag='007'"]), Override(("method_params", "x"), 1e-05)]
    tags = start_tags("proxy", ["sync"], (0, 1, 2, 5), given)
    assert tags[SEEDS_TAG] == "0,1,2,5"
    assert json.loads(tags[OVERRIDES_TAG])[:2] == ["budget.steps=3", "method_params.tag='007'"]  # as typed
    assert parse_overrides(json.loads(tags[OVERRIDES_TAG])) == given


def test_an_unparsed_set_text_is_refused_by_load_config(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="parse_override"):
        load_config(write_config(tmp_path), ["budget.steps=3"])  # type: ignore[list-item]
