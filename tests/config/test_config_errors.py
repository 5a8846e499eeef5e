"""Bad user input through ``distrepro run``: exit status 2 and one clear line naming file and field.

Every case goes through :func:`distrepro.cli.main`, as a user would; all of them fail while the jobs
are built, before anything trains or is logged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from tiny_config import TINY

from distrepro.cli import main
from distrepro.config.run_config import load_config
from distrepro.job.resolve import build_job

pytestmark = pytest.mark.smoke

#: the shared tiny config with twice its data and steps
BASE: dict[str, Any] = {
    **TINY,
    "dataset": {"name": "synthetic", "params": {"train_size": 128, "test_size": 32, "image_size": 8}},
    "budget": {"steps": 2},
}

GOOD_PROFILE: dict[str, Any] = {
    "schema_version": 1,
    "name": "tiny-2",
    "description": "two test GPUs",
    "nodes": [
        {
            "name": "n0",
            "devices": [
                {
                    "name": "g",
                    "kind": "gpu",
                    "count": 2,
                    "memory_gib": 16,
                    "effective_flops_per_s": 1e12,
                    "source": "[E] test",
                }
            ],
        }
    ],
    "network": {
        "intra_node": {"latency_us": 20, "bandwidth_gbytes_per_s": 2, "source": "[E] test"},
        "inter_node": {"latency_us": 100, "bandwidth_gbytes_per_s": 1, "source": "[E] test"},
    },
}


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from a scratch folder with a private tracking store, so a bug cannot write into the repo."""
    monkeypatch.chdir(tmp_path)


def write_config(tmp_path: Path, data: dict[str, Any] | str, name: str = "run.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def with_(**changes: Any) -> dict[str, Any]:
    data = yaml.safe_load(yaml.safe_dump(BASE))
    data.update(changes)
    return data


def fails(capsys: pytest.CaptureFixture[str], argv: list[str], *fragments: str) -> str:
    """Run the CLI, expect exit status 2 and one line on stderr containing every fragment."""
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    assert err.startswith("distrepro: error: ")
    assert "Traceback" not in err and "Traceback" not in out
    assert err.strip().count("\n") == 0, err  # one line
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    return err


def run_args(path: Path, *extra: str) -> list[str]:
    return ["run", str(path), "--no-progress", *extra]


# ---------------------------------------------------------------------- the run config


def test_malformed_yaml_names_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, "method: ar_sgd\nbudget: {steps: 2\neval: {times: 1}\n")
    fails(capsys, run_args(path), str(path), "malformed YAML at line 3")


def test_missing_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nope.yaml"
    fails(capsys, run_args(path), str(path), "file not found")


def test_top_level_must_be_a_mapping(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, "- method: ar_sgd\n")
    fails(capsys, run_args(path), str(path), "expected a mapping at the top level, got list")


def test_unknown_method(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, with_(method="ar_sdg"))
    fails(capsys, run_args(path), str(path), "field 'method'", "unknown method 'ar_sdg'", "ar_sgd", "gossip")


def test_unknown_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, with_(dataset={"name": "cifar100x"}))
    fails(capsys, run_args(path), str(path), "field 'dataset.name'", "unknown dataset 'cifar100x'", "synthetic")


def test_unknown_dataset_param(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, with_(dataset={"name": "synthetic", "params": {"img_size": 8}}))
    fails(capsys, run_args(path), str(path), "field 'dataset.params.img_size'", "Extra inputs are not permitted")


def test_unknown_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Names the profile file it looked for and the profiles there are."""
    path = write_config(tmp_path, with_(profile="homogenous-4"))
    fails(capsys, run_args(path), "homogenous-4.yaml", "hardware profile not found", "homogeneous-4")


def test_unknown_key_in_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, with_(bugdet={"steps": 3}))
    fails(capsys, run_args(path), str(path), "field 'bugdet'", "Extra inputs are not permitted")


def test_unknown_nested_key_in_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, with_(eval={"times": 1, "every_step": 2}))
    fails(capsys, run_args(path), str(path), "field 'eval.every_step'", "Extra inputs are not permitted")


def test_two_budget_units(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, with_(budget={"steps": 2, "epochs": 1}))
    fails(capsys, run_args(path), str(path), "field 'budget'", "set exactly one of", "['steps', 'epochs']")


def test_non_positive_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, with_(budget={"steps": 0}))
    fails(capsys, run_args(path), str(path), "field 'budget.steps'", "greater than 0")


@pytest.mark.parametrize(
    ("evaluation", "fragments"),
    [
        ({"replicas": "sometimes"}, ("field 'eval.replicas'", "valid boolean")),
        ({"bn_recalibration_batches": -1}, ("field 'eval.bn_recalibration_batches'", "greater than or equal to 0")),
        ({"bn_recalibration_batches": 2, "bn_recalibration_batch_size": 0}, ("eval.bn_recalibration_batch_size",)),
        ({"bn_recalibration_batch_size": 8}, ("field 'eval'", "needs bn_recalibration_batches > 0")),
    ],
    ids=["replicas", "negative-batches", "zero-batch-size", "size-without-batches"],
)
def test_bad_evaluation_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], evaluation: dict[str, Any], fragments: tuple[str, ...]
) -> None:
    path = write_config(tmp_path, with_(eval={"times": 1, **evaluation}))
    fails(capsys, run_args(path), str(path), *fragments)


def test_bad_method_param_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, with_(method_params={"lrr": 0.1}))
    fails(capsys, run_args(path), str(path), "field 'method_params.lrr'", "Extra inputs are not permitted")


def test_bad_method_param_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, with_(method_params={"weighting": "by_size"}))
    fails(capsys, run_args(path), str(path), "field 'method_params.weighting'", "'samples' or 'equal'")


@pytest.mark.parametrize("value", ["yes", 1, "on"])
def test_batched_replicas_takes_true_false_or_auto(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: object
) -> None:
    path = write_config(tmp_path, with_(batched_replicas=value))
    fails(capsys, run_args(path), str(path), "field 'batched_replicas'", "expected true, false or auto")


def test_batched_replicas_off_is_left_out_of_the_logged_config(tmp_path: Path) -> None:
    """Runs made before the switch existed keep their config digest under ``false`` (their arm and seed stay theirs);
    the default, ``auto``, is logged, so a run made with it is a run of another config."""
    off = load_config(write_config(tmp_path, with_(batched_replicas=False)))
    assert "batched_replicas" not in off.model_dump(mode="json")
    default = load_config(write_config(tmp_path, with_()))
    assert default.batched_replicas == "auto" and default.model_dump(mode="json")["batched_replicas"] == "auto"
    assert default.model_dump(mode="json") != off.model_dump(mode="json")
    auto = load_config(write_config(tmp_path, with_(batched_replicas="auto")))
    assert auto.model_dump(mode="json") == default.model_dump(mode="json")


def test_wrong_number_of_per_rank_batch_sizes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, with_(batch_size=[8, 8, 8]))
    fails(capsys, run_args(path), str(path), "field 'batch_size'", "3 batch sizes for 4 workers")


def test_non_positive_batch_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, with_(batch_size=[8, 0, 8, 8]))
    fails(capsys, run_args(path), str(path), "field 'batch_size'", "batch sizes must be positive")


def test_batch_size_profile_without_profile_batch_sizes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, with_(batch_size="profile"))  # homogeneous-4 declares none
    fails(
        capsys,
        run_args(path),
        "homogeneous-4.yaml",
        "field 'nodes[0].devices[0].batch_size'",
        "batch_size: profile needs a batch_size on every device group",
    )


# ---------------------------------------------------------------------- --set overrides


def test_set_without_equals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, BASE)
    fails(capsys, run_args(path, "--set", "budget.steps"), "--set", "overrides look like key.path=value")


def test_set_with_unparsable_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, BASE)
    fails(capsys, run_args(path, "--set", "budget.steps=[1"), "--set", "field 'budget.steps'", "cannot parse value")


def test_set_into_a_scalar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, BASE)
    fails(capsys, run_args(path, "--set", "method.lr=0.1"), "--set", "field 'method.lr'", "'method' is not a mapping")


def test_set_with_invalid_value_names_the_config_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, BASE)
    fails(capsys, run_args(path, "--set", "budget.steps=-3"), str(path), "field 'budget.steps'", "greater than 0")


def test_set_with_bad_method_param(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, BASE)
    fails(capsys, run_args(path, "--set", "method_params.lrr=0.1"), str(path), "field 'method_params.lrr'")


# ---------------------------------------------------------------------- hardware profiles


def write_profile(tmp_path: Path, data: dict[str, Any] | str) -> Path:
    path = tmp_path / "profiles" / "custom.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def test_good_custom_profile_by_path_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The control case of the profile errors below: the same file, unbroken, fails only later, on purpose."""
    profile = write_profile(tmp_path, GOOD_PROFILE)
    path = write_config(tmp_path, with_(profile=str(profile), batch_size=[8, 8, 8]))
    fails(capsys, run_args(path), str(path), "3 batch sizes for 2 workers")


def test_negative_bandwidth_in_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load(yaml.safe_dump(GOOD_PROFILE))
    data["network"]["intra_node"]["bandwidth_gbytes_per_s"] = -2
    profile = write_profile(tmp_path, data)
    path = write_config(tmp_path, with_(profile=str(profile)))
    fails(capsys, run_args(path), str(profile), "field 'network.intra_node.bandwidth_gbytes_per_s'", "greater than 0")


def test_missing_field_in_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load(yaml.safe_dump(GOOD_PROFILE))
    del data["nodes"][0]["devices"][0]["memory_gib"]
    profile = write_profile(tmp_path, data)
    path = write_config(tmp_path, with_(profile=str(profile)))
    fails(capsys, run_args(path), str(profile), "field 'nodes[0].devices[0].memory_gib'", "Field required")


def test_profile_source_without_provenance_tag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load(yaml.safe_dump(GOOD_PROFILE))
    data["network"]["inter_node"]["source"] = "a guess"
    profile = write_profile(tmp_path, data)
    path = write_config(tmp_path, with_(profile=str(profile)))
    fails(capsys, run_args(path), str(profile), "field 'network.inter_node.source'", "provenance tag")


def test_malformed_profile_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = yaml.safe_dump(GOOD_PROFILE, sort_keys=False).replace("name: tiny-2", "name: [tiny-2")
    profile = write_profile(tmp_path, text)
    path = write_config(tmp_path, with_(profile=str(profile)))
    fails(capsys, run_args(path), str(profile), "malformed YAML at line")


def test_profile_batch_sizes_are_used_when_declared(tmp_path: Path) -> None:
    """The control case of ``batch_size: profile``: with batch sizes in the profile the job builds."""
    data = yaml.safe_load(yaml.safe_dump(GOOD_PROFILE))
    data["nodes"][0]["devices"][0]["batch_size"] = 4
    profile = write_profile(tmp_path, data)
    path = write_config(tmp_path, with_(profile=str(profile), batch_size="profile"))
    job = build_job(load_config(path), 0, source=path)
    assert job.batch_sizes == (4, 4)


@pytest.mark.smoke
def test_seeds_take_inclusive_ranges_as_a_preregistration_writes_them() -> None:
    from distrepro.config.run_config import parse_seeds

    assert parse_seeds("100-103") == [100, 101, 102, 103]
    assert parse_seeds("0,1, 5-6") == [0, 1, 5, 6]


@pytest.mark.smoke
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("109-100", "ends before it starts"),
        ("0-2,2", "seed index 2 is given twice"),
        ("100-", "is not a seed index"),
        ("-1", "is not a seed index"),
        ("0-99999999", "more than 10000 seeds given"),
    ],
)
def test_bad_seed_ranges_get_one_line_naming_the_flag(text: str, message: str) -> None:
    from distrepro.config.run_config import parse_seeds
    from distrepro.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        parse_seeds(text)
    assert message in str(err.value) and "--seeds" in str(err.value)


def test_index_spans_is_what_parse_seeds_reads_back() -> None:
    from distrepro.config.run_config import index_spans, parse_seeds

    assert index_spans([5, 0, 1, 2]) == "0-2, 5" and index_spans([100, 101, 102, 103, 104]) == "100-104"
    assert parse_seeds(index_spans([0, 1, 2, 5, 7, 8])) == [0, 1, 2, 5, 7, 8]
