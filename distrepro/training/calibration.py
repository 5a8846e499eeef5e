"""Measure one device's step time against per-device batch and write a profile entry (``distrepro calibrate``).

The emulated workload's real architecture (torchvision ResNet/ViT at the emulated input size, or the CIFAR
ResNet-18) trains on synthetic data on the device at hand, one full step (forward, backward, SGD with momentum)
per timed repeat: ``--warmup`` steps at each batch are discarded (allocator, cuDNN autotuning, first-touch pages),
then ``--repeats`` steps are timed with wall and CPU time (CUDA: synchronised before and after). The median step
per batch is fitted to the engine's own form ``t0 + b/peak`` (:mod:`distrepro.hardware.calibrate`) and written as
a one-device profile graded ``[M]``, naming the machine, the software versions, the date, the load average
before and after and the CPU time beside the wall time, so a reader can judge the measurement.

Where it goes (:func:`write_profile`): ``--out FILE`` (a calibrated profile there gains the workload), else the
first ``--root``'s ``hardware_profiles/``, else standard output. The shipped profiles are never written unless
``--into-shipped`` says so. The command line is :mod:`distrepro.cli.calibrate`.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrepro.errors import ConfigError
from distrepro.hardware.calibrate import (
    StepFit,
    device_entry,
    fit_step_curve,
    merge_entry,
    single_device_profile,
)

#: emulated workload -> (model of distrepro.training.models, classes); the input shape is the workload's own
ARCHITECTURES: dict[str, tuple[str, int]] = {
    "resnet18_in100_224": ("resnet18", 100),
    "resnet18_in1k_224": ("resnet18", 1000),
    "resnet50_in100_224": ("resnet50", 100),
    "resnet50_in1k_224": ("resnet50", 1000),
    "resnet152_in1k_224": ("resnet152", 1000),
    "resnet18_cifar_32": ("resnet18_cifar", 10),
    "vit_b16_224": ("vit_b_16", 1000),
}
#: most batch sizes and repeats one call may time (bounds the run)
MAX_BATCHES = 16
MAX_REPEATS = 100


@dataclass(frozen=True)
class BatchTiming:
    """Wall and CPU seconds of each timed step at one per-device batch."""

    batch: int
    wall_s: tuple[float, ...]
    cpu_s: tuple[float, ...]

    @property
    def median_wall_s(self) -> float:
        return statistics.median(self.wall_s)

    @property
    def median_cpu_s(self) -> float:
        return statistics.median(self.cpu_s)


def parse_batches(text: str) -> list[int]:
    """``"1,2,4"`` → ``[1, 2, 4]``; a clear error for anything else."""
    try:
        batches = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError("--batches", None, f"expected comma-separated positive integers, got '{text}'") from None
    if not batches or any(b < 1 for b in batches) or len(batches) > MAX_BATCHES:
        raise ConfigError("--batches", None, f"expected 1 to {MAX_BATCHES} positive integers, got '{text}'")
    return sorted(set(batches))


def resolve_device(device: str, precision: str) -> Any:
    """The torch device to time on; a clear refusal where it is absent or the precision does not apply."""
    import torch

    if device == "cuda":
        if not torch.cuda.is_available():
            here = f"torch {torch.__version__}"
            raise ConfigError("--device", None, f"cuda: no CUDA device is available here ({here}); use --device cpu")
        return torch.device("cuda")
    if precision == "amp":
        raise ConfigError("--precision", None, "amp (float16 autocast with a gradient scaler) needs --device cuda")
    return torch.device("cpu")


def machine_description(device: Any) -> str:
    """Which machine and software measured: host, CPU or GPU model, torch, threads, Python."""
    import torch

    if device.type == "cuda":
        what = f"GPU {torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda})"
    else:
        model = platform.processor() or platform.machine()
        cpuinfo = Path("/proc/cpuinfo")
        if cpuinfo.is_file():
            for line in cpuinfo.read_text(errors="replace").splitlines():
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        what = f"CPU {model}, {os.cpu_count()} logical CPUs, {torch.get_num_threads()} torch threads"
    return f"host {platform.node()}, {what}, torch {torch.__version__}, Python {platform.python_version()}"


def time_steps(
    workload: str, device: Any, batches: list[int], warmup: int, repeats: int, precision: str
) -> list[BatchTiming]:
    """Time full training steps of ``workload``'s architecture at each batch (synthetic data, SGD with momentum)."""
    import torch

    from distrepro.hardware.workloads import get_workload
    from distrepro.training.models import build_model

    if workload not in ARCHITECTURES:
        raise ConfigError(
            "WORKLOAD",
            None,
            f"no architecture to time for '{workload}'; calibrate supports: {', '.join(sorted(ARCHITECTURES))}",
        )
    shape = get_workload(workload).input_shape
    arch, classes = ARCHITECTURES[workload]
    model = build_model(arch, classes, shape).to(device).train()  # type: ignore[arg-type]
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    amp = precision == "amp"
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    loss_fn = torch.nn.CrossEntropyLoss()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    out: list[BatchTiming] = []
    gen = torch.Generator().manual_seed(0)
    for batch in batches:
        x = torch.randn((batch, *shape), generator=gen).to(device)
        y = torch.randint(0, classes, (batch,), generator=gen).to(device)
        walls: list[float] = []
        cpus: list[float] = []
        for i in range(warmup + repeats):
            sync()
            w0, c0 = time.perf_counter(), time.process_time()
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=torch.float16, enabled=amp):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            sync()
            if i >= warmup:
                walls.append(time.perf_counter() - w0)
                cpus.append(time.process_time() - c0)
        out.append(BatchTiming(batch, tuple(walls), tuple(cpus)))
    return out


def provenance(
    device: Any, precision: str, timings: list[BatchTiming], warmup: int, load: tuple[Any, Any], kernels: str = ""
) -> str:
    """The rest of the ``[M]`` source: machine, versions, date, repeats, CPU beside wall, load average, and on a GPU
    which kernels ran (``kernels``)."""
    cpu = ", ".join(f"b={t.batch}: {t.median_cpu_s / t.median_wall_s:.2f}" for t in timings)
    date = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{precision.upper()}{'; ' + kernels if kernels else ''}, synthetic data, full step with SGD momentum; "
        f"{len(timings[0].wall_s)} timed steps per "
        f"batch after {warmup} discarded; CPU/wall per step {cpu}; load average {load[0][0]:.2f} before, "
        f"{load[1][0]:.2f} after; {machine_description(device)}; distrepro calibrate, {date}"
    )


def dump_yaml(data: dict[str, Any]) -> str:
    """YAML a reader can edit: keys in order, no anchors for the two placeholder links."""
    import yaml

    class _NoAliases(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    return yaml.dump(data, Dumper=_NoAliases, sort_keys=False, width=120)


def write_profile(path: Path, name: str, entry: dict[str, Any], into_shipped: bool) -> dict[str, Any]:
    """Write (or extend) the calibrated profile at ``path``; refuses the shipped profiles folder unless asked."""
    from distrepro.plugins.roots import shipped_root
    from distrepro.safe_yaml import read_yaml_mapping

    shipped = (shipped_root() / "hardware_profiles").resolve()
    if path.resolve().parent == shipped and not into_shipped:
        raise ConfigError(path, None, "is in the shipped profiles folder: pass --into-shipped to write there")
    data = single_device_profile(name, entry)
    if path.is_file():
        data = read_yaml_mapping(path, "calibrated profile")
        try:
            groups = data["nodes"][0]["devices"]
            groups[0] = merge_entry(groups[0], entry)
        except (KeyError, IndexError, TypeError):
            raise ConfigError(path, "nodes[0].devices[0]", "exists but holds no device group to extend") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_yaml(data), encoding="utf-8")
    return data


def calibrate(
    workload: str,
    device_name: str,
    precision: str,
    batches: list[int],
    warmup: int,
    repeats: int,
    name: str | None,
    deterministic: Callable[[Any], AbstractContextManager[Any]] | None = None,
) -> tuple[str, dict[str, Any], StepFit, list[BatchTiming]]:
    """Measure and fit: (profile name, the ``[M]`` device entry, the fit, the timings).

    ``deterministic``: the context that switches the device to the deterministic kernels training runs under
    (:func:`distrepro.hardware.device.deterministic_cuda`, handed down by ``distrepro calibrate --deterministic``: this
    layer sits below the engine), entered around the timing; None: torch's defaults. On a GPU they cost a step
    about 11 % (median on an H100, BENCHMARKS.md "GPU recipes on a lent H100"), so a profile that prices this suite's
    own GPU runs is measured with them, one of the paper's hardware at its usual speed without; the source says
    which."""
    if not 0 <= warmup <= MAX_REPEATS or not 1 <= repeats <= MAX_REPEATS:
        raise ConfigError("--repeats", None, f"--warmup 0..{MAX_REPEATS} and --repeats 1..{MAX_REPEATS}")
    device = resolve_device(device_name, precision)
    load_before = os.getloadavg()
    with (deterministic or nullcontext)(device):
        timings = time_steps(workload, device, batches, warmup, repeats, precision)
    load = (load_before, os.getloadavg())
    fit = fit_step_curve([(t.batch, t.median_wall_s) for t in timings])
    profile_name = name or f"calibrated-{platform.node() or 'host'}-{device.type}".lower()
    if device.type == "cuda":
        import torch

        memory = torch.cuda.get_device_properties(device).total_memory / 2**30
    else:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    kind = "gpu" if device.type == "cuda" else "cpu"
    chosen = ("deterministic kernels" if deterministic else "default kernels") if device.type == "cuda" else ""
    where = provenance(device, precision, timings, warmup, load, chosen)
    entry = device_entry(workload, fit, f"{kind}-{platform.node() or 'host'}", kind, memory, where)
    return profile_name, entry, fit, timings
