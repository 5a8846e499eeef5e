"""The real DeepSpeed arm: skips cleanly without DeepSpeed or a process group; on 2 gloo ranks its
parameters, emulated clock and bytes match the modelled ZeRO-2 arm (``deepspeed_zero``) in-process."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys
import time

import pytest
import torch

from distrepro import api
from distrepro.config.run_config import validate_config
from distrepro.engine.inprocess.run import InProcessEngine
from distrepro.engine.multiprocess.launch import DistEngine
from distrepro.job.resolve import build_job
from distrepro.plugins import registry

try:
    HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None
except ImportError:  # blocked or broken install
    HAS_DEEPSPEED = False

BLOCK_DEEPSPEED = """
import sys
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name == "deepspeed" or name.startswith("deepspeed."):
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, _Block())
from distrepro.plugins import registry
from distrepro.config.run_config import validate_config
from distrepro.errors import ConfigError
from distrepro.job.resolve import build_job
plugin = registry.methods()["deepspeed_real"]
from distrepro.api import ClusterLayout
print(plugin.cls(plugin.cls.Params()).skip(ClusterLayout(2, (0, 0), ("n0",))))
try:
    build_job(validate_config({"method": "deepspeed_real", "engine": "dist", "profile": "chao-1m-1to2"}), 0, "x.yaml")
except ConfigError as exc:
    print(exc)
"""


@pytest.mark.smoke
def test_skip_says_why_in_process() -> None:
    method = registry.methods()["deepspeed_real"].cls(registry.methods()["deepspeed_real"].cls.Params())
    reason = method.skip(api.ClusterLayout(2, (0, 0), ("n0",)))
    assert reason is not None
    assert ("engine: dist" in reason) if HAS_DEEPSPEED else ("not installed" in reason)


def test_skip_says_not_installed_when_deepspeed_is_hidden() -> None:
    out = subprocess.run([sys.executable, "-c", BLOCK_DEEPSPEED], capture_output=True, text=True, check=True)
    assert "DeepSpeed is not installed" in out.stdout, out.stdout + out.stderr
    # and a run is refused before any rank starts, naming the config file and field
    assert "x.yaml" in out.stdout and "method" in out.stdout and "'deepspeed' (optional extra" in out.stdout


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


@pytest.mark.distributed
@pytest.mark.slow
@pytest.mark.skipif(not HAS_DEEPSPEED, reason='DeepSpeed is not installed (pip install -e ".[deepspeed]")')
def test_real_zero2_matches_modelled_arm_on_two_ranks() -> None:
    base = {
        "method_params": {"weight_decay": 1e-3},
        "profile": "chao-1m-1to2",
        "dataset": {"params": {"train_size": 256, "test_size": 128, "image_size": 8}},
        "batch_size": [8, 16],
        "budget": {"steps": 4},
        "eval": {"times": 1},
        "dist": {"timeout_s": 120, "startup_timeout_s": 300},
    }
    real = build_job(validate_config({**base, "method": "deepspeed_real", "engine": "dist"}), 0)
    # the same seed index gives both arms the same initial model and data order; the clock's jitter is
    # the method's own, so give the modelled arm the real arm's: the arms then differ only in who does the math
    modelled = dataclasses.replace(
        build_job(validate_config({**base, "method": "deepspeed_zero"}), 0), compute=real.compute
    )
    assert modelled.seed_parts == real.seed_parts
    a = InProcessEngine().run(modelled)
    t0 = time.perf_counter()
    b = DistEngine().run_cell(real, None)
    print(f"deepspeed_real: 2 ranks x 4 steps, {time.perf_counter() - t0:.1f} s wall incl. start-up")
    assert torch.allclose(_flat(a.models[0]), _flat(b.models[0]), atol=1e-5)
    assert all(torch.allclose(_flat(b.models[0]), _flat(m), atol=1e-7) for m in b.models[1:])
    assert b.final.emulated_s == pytest.approx(a.final.emulated_s, rel=1e-9)
    assert [w.bytes_sent for w in b.final.workers] == [w.bytes_sent for w in a.final.workers]
