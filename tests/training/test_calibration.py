"""``distrepro calibrate``: it times real steps, writes a loadable ``[M]`` profile, refuses what it cannot do."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrepro.cli import main
from distrepro.errors import ConfigError
from distrepro.hardware.profiles import load_profile
from distrepro.training import calibration
from distrepro.training.calibration import parse_batches, resolve_device


@pytest.fixture(autouse=True)
def shipped_roots_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--root`` exports DISTREPRO_PATH: undone after each test (set before deleted, so there is an undo)."""
    from distrepro.plugins import roots

    for name in (roots.ROOT_ENV, roots.PATH_ENV, "DISTREPRO_PROFILES_DIR"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


@pytest.fixture
def small_architecture(monkeypatch: pytest.MonkeyPatch) -> None:
    """Time the 100k-parameter proxy CNN at the CIFAR workload's input: the same code path, a fraction of the CPU."""
    monkeypatch.setitem(calibration.ARCHITECTURES, "resnet18_cifar_32", ("small_cnn", 10))


def test_batches_parse_sorted_and_unique() -> None:
    assert parse_batches("4,1,2,2") == [1, 2, 4]


@pytest.mark.parametrize("text", ["", "0,1", "a,b", "1,-3", ",".join(str(b) for b in range(1, 18))])
def test_bad_batches_are_one_clear_error(text: str) -> None:
    with pytest.raises(ConfigError, match="--batches"):
        parse_batches(text)


def test_cuda_is_refused_clearly_where_there_is_none() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(ConfigError, match="no CUDA device"):
        resolve_device("cuda", "fp32")


def test_amp_on_cpu_is_refused() -> None:
    with pytest.raises(ConfigError, match="amp"):
        resolve_device("cpu", "amp")


@pytest.mark.usefixtures("small_architecture")
def test_calibrate_writes_a_profile_that_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mine.yaml"
    argv = ["calibrate", "resnet18_cifar_32", "--batches", "1,2", "--warmup", "1", "--repeats", "1"]
    assert main([*argv, "--out", str(out), "--name", "mine"]) == 0
    profile = load_profile(out)
    device = profile.device(0)
    assert device.source.startswith("[M]") and "load average" in device.source and "torch" in device.source
    assert device.throughput_samples_per_s["resnet18_cifar_32"] > 0
    assert "resnet18_cifar_32" in device.step_overhead_ms
    assert "written to" in capsys.readouterr().out
    assert main([*argv, "--out", str(out), "--name", "mine"]) == 0  # again: the entry is replaced, not repeated
    assert load_profile(out).device(0).source.count("[M] resnet18_cifar_32:") == 1


@pytest.mark.usefixtures("small_architecture")
def test_calibrate_goes_into_a_root_and_never_into_the_shipped_profiles(tmp_path: Path) -> None:
    from distrepro.plugins.roots import shipped_root

    (tmp_path / "hardware_profiles").mkdir()  # a root holds at least one plugin folder

    argv = ["calibrate", "resnet18_cifar_32", "--batches", "1", "--warmup", "0", "--repeats", "1", "--name", "cal"]
    assert main([*argv, "--root", str(tmp_path)]) == 0
    assert load_profile(tmp_path / "hardware_profiles" / "cal.yaml").name == "cal"
    shipped = shipped_root() / "hardware_profiles" / "cal-never.yaml"
    assert main([*argv, "--out", str(shipped)]) == 2
    assert not shipped.exists()


def test_a_workload_without_an_architecture_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "gpt2_small_owt_1024tok", "--batches", "1"]) == 2
    assert "calibrate supports" in capsys.readouterr().err


@pytest.mark.usefixtures("small_architecture")
def test_deterministic_kernels_are_entered_around_the_timing_and_said_on_a_gpu(tmp_path: Path) -> None:
    """``--deterministic`` hands the engine's deterministic-kernel context down; the timing runs inside it. On the
    CPU the source names no kernels (torch's CPU kernels have no such switch); on a GPU it names which ran."""
    from contextlib import contextmanager

    entered: list[str] = []

    @contextmanager
    def recording(device):  # type: ignore[no-untyped-def]
        entered.append(device.type)
        yield

    _, entry, _, _ = calibration.calibrate("resnet18_cifar_32", "cpu", "fp32", [1], 0, 1, None, recording)
    assert entered == ["cpu"]
    assert "kernels" not in entry["source"]
    timings = [calibration.BatchTiming(1, (0.01,), (0.01,))]
    load = ((0.5, 0.5, 0.5), (0.6, 0.6, 0.6))
    said = calibration.provenance(resolve_device("cpu", "fp32"), "fp32", timings, 0, load, "deterministic kernels")
    assert said.startswith("FP32; deterministic kernels, synthetic data")
    argv = ["calibrate", "resnet18_cifar_32", "--batches", "1", "--warmup", "0", "--repeats", "1", "--deterministic"]
    assert main([*argv, "--out", str(tmp_path / "det.yaml"), "--name", "det"]) == 0
    assert load_profile(tmp_path / "det.yaml").device(0).source.startswith("[M]")
