"""What the deterministic CUDA settings training runs use cost per step (a lent-GPU measurement).

``distrepro calibrate`` times steps with torch's defaults (cuDNN may pick any algorithm); a training run on CUDA
enters :func:`distrepro.hardware.device.deterministic_cuda` (deterministic algorithms, ``cudnn.deterministic``, no
``cudnn.benchmark``). This times the same steps both ways, interleaved, so the GPU recipes' price can say what
determinism adds.

    python benchmarks/gpu_deterministic_cost.py
"""

from __future__ import annotations

import sys

import torch

from distrepro.hardware.device import deterministic_cuda, resolve_device
from distrepro.training.calibration import time_steps

CASES = [("resnet18_cifar_32", [64, 128, 256]), ("resnet50_in1k_224", [32, 64])]


def main() -> int:
    device = resolve_device("cuda")
    print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    print("workload | precision | batch | default ms | deterministic ms | ratio")
    for workload, batches in CASES:
        for precision in ("fp32", "amp"):
            for rep in range(2):  # twice each way, interleaved: the spread of one way is the noise
                plain = time_steps(workload, device, batches, 5, 10, precision)
                with deterministic_cuda(device):
                    det = time_steps(workload, device, batches, 5, 10, precision)
                for a, b in zip(plain, det, strict=True):
                    ratio = b.median_wall_s / a.median_wall_s
                    print(
                        f"{workload} | {precision} | {a.batch} | {a.median_wall_s * 1e3:.2f} | "
                        f"{b.median_wall_s * 1e3:.2f} | {ratio:.3f} (rep {rep})",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
