"""Does a CUDA run repeat itself bit for bit, and if not, where does it part? (a lent-GPU diagnostic)

Runs small arms twice on the same device and compares final metrics and parameters: the asynchronous A²CiD²
arm of ``tests/methods/test_gpu_scale.py``, a synchronous arm (QSR's recipe), and the A²CiD² arm on the CPU (the
engine's own determinism, no CUDA kernel involved). It also lists the operations torch warns have no
deterministic CUDA kernel (``use_deterministic_algorithms(True, warn_only=True)``).

    python benchmarks/gpu_determinism.py
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "_support"))


def _arm(recipe: str, root: Path, device: str, extra: list[str]) -> list[str]:
    from distrepro.config.overrides import parse_overrides
    from distrepro.config.run_config import load_config

    sets = [
        f"device={device}", f"dataset.root={root}", "dataset.params.verify_checksums=false", "model.params.width=64",
        "batch_size=4", "budget={steps: 3}", "eval={times: 1, batch_size: 8}", "seeds=[0]", "scale=gpu", *extra,
    ]  # fmt: skip
    return load_config(REPO / recipe, parse_overrides(sets))  # type: ignore[return-value]


def twice(name: str, cfg: object) -> None:
    from distrepro.engine.inprocess import InProcessEngine
    from distrepro.job.resolve import build_job

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = [InProcessEngine().run(build_job(cfg, 0)) for _ in range(2)]  # type: ignore[arg-type]
    notes = sorted({str(w.message).split(".")[0][:110] for w in caught if "determinis" in str(w.message)})
    a, b = runs[0].final.metrics, runs[1].final.metrics
    same_params = all(
        torch.equal(p, q)
        for m1, m2 in zip(runs[0].models, runs[1].models, strict=True)
        for p, q in zip(m1.parameters(), m2.parameters(), strict=True)
    )
    differ = {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)}
    print(f"{name}: metrics equal {not differ}, parameters equal {same_params}; differing {differ}")
    for n in notes:
        print(f"   nondeterministic op warned: {n}")


def main() -> int:
    from imagefolders import write_fake_cifar

    root = Path(tempfile.mkdtemp(prefix="gpu_determinism_"))  # a fresh folder: nothing on the machine assumed
    write_fake_cifar(root, per_batch=16, n_test=8)
    acid = ['method_params.topology="ring"', "schedule.warmup_epochs=0"]
    devices = ["cuda", "cpu"] if torch.cuda.is_available() else ["cpu"]
    for device in devices:
        twice(f"acid ring ({device})", _arm("methods/acid/configs/train16.gpu.yaml", root, device, acid))
        twice(f"qsr ({device})", _arm("methods/qsr/configs/qsr.gpu.yaml", root, device, ["schedule.warmup_steps=1"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
