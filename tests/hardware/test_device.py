"""The run config's ``device`` (distrepro/hardware/device.py): cpu by default and unchanged, ``auto`` falls back to
the CPU, ``cuda`` without CUDA is one line naming the file and the field, before anything is logged."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from clirun import TINY, run_cli, write_config

from distrepro.config.overrides import parse_overrides
from distrepro.config.run_config import load_config
from distrepro.engine.inprocess import InProcessEngine
from distrepro.errors import ConfigError
from distrepro.hardware.device import deterministic_cuda, resolve_device
from distrepro.job.resolve import build_job

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour where CUDA is absent")


def test_cpu_is_the_default_and_resolves_to_the_cpu(tmp_path: Path) -> None:
    cfg = load_config(write_config(tmp_path))
    assert cfg.device == "cpu" and resolve_device(cfg.device) == torch.device("cpu")


def test_an_unknown_device_names_the_file_and_the_field(tmp_path: Path) -> None:
    path = write_config(tmp_path, device="gpu")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert err.value.field == "device" and str(path) in str(err.value)


@no_cuda
def test_cuda_without_cuda_is_a_config_error_naming_file_and_field(tmp_path: Path) -> None:
    path = write_config(tmp_path, device="cuda")
    with pytest.raises(ConfigError) as err:
        resolve_device("cuda", path)
    text = str(err.value)
    assert err.value.field == "device" and str(path) in text and "\n" not in text
    assert "device: cuda asks for a GPU" in text and "device: cpu or auto" in text
    job = build_job(load_config(path), 0)  # a plan or a remote executor may build it; training here may not
    with pytest.raises(ConfigError, match="field 'device'"):
        InProcessEngine().run(job)


@no_cuda
def test_auto_without_cuda_trains_exactly_as_the_cpu_default(tmp_path: Path) -> None:
    default = InProcessEngine().run(build_job(load_config(write_config(tmp_path)), 0))
    auto = InProcessEngine().run(build_job(load_config(write_config(tmp_path, device="auto")), 0))
    assert auto.final.metrics == default.final.metrics and auto.final.step == TINY["budget"]["steps"]
    for a, b in zip(auto.models, default.models, strict=True):
        assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_deterministic_cuda_leaves_a_cpu_run_alone() -> None:
    before = torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark
    with deterministic_cuda(torch.device("cpu")):
        assert (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark) == before
    assert (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.benchmark) == before


@no_cuda
def test_cli_refuses_cuda_in_one_line_before_anything_is_logged(tmp_path: Path) -> None:
    path = write_config(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    done = run_cli(["run", str(path), "--set", "device=cuda", "--no-progress"], uri, tmp_path)
    assert done.rc != 0 and "Traceback" not in done.err and len(done.error_lines) == 1, done.err
    assert "field 'device'" in done.error_lines[0] and str(path) in done.error_lines[0]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiments = client.search_experiments()
    assert not client.search_runs([e.experiment_id for e in experiments]) if experiments else True


def test_a_dataset_drawing_from_the_global_rng_repeats_in_one_process(tmp_path: Path) -> None:
    """CIFAR-10's random crop and flip draw from torch's global generator (as torchvision's transforms do). The
    engine seeds it from the run, so the same job twice in one process (a pool worker's next cell, after anything
    else drew from it) trains to the same bits, and the caller's generator is left where it was."""
    from imagefolders import write_fake_cifar

    write_fake_cifar(tmp_path, per_batch=16, n_test=8)
    sets = [
        "device=cpu", f"dataset.root={tmp_path}", "dataset.params.verify_checksums=false", "model.params.width=4",
        "batch_size=2", "budget={steps: 2}", "eval={times: 1, batch_size: 8}", "seeds=[0]", "scale=gpu",
        "torch_threads=1", "schedule.warmup_steps=1",
    ]  # fmt: skip
    cfg = load_config(Path(__file__).resolve().parents[2] / "methods/qsr/configs/qsr.gpu.yaml", parse_overrides(sets))
    assert cfg.dataset.params.get("augment") is True  # the point of the test: crops and flips are drawn
    runs = []
    for draws in (0, 5):
        torch.rand(draws)  # what ran before in the process moves the global generator
        before = torch.get_rng_state()
        runs.append(InProcessEngine().run(build_job(cfg, 0)))
        assert torch.equal(torch.get_rng_state(), before)
    assert runs[0].final.metrics == runs[1].final.metrics
    for a, b in zip(runs[0].models, runs[1].models, strict=True):
        assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
