"""DeepSpeed ZeRO-2 for real: ``deepspeed.initialize`` on the rank's model, on the torch.distributed engine.

Why a second DeepSpeed arm: ``deepspeed_zero`` models ZeRO-1/2's *traffic* on DDP's math inside the
harness; this arm runs DeepSpeed's own ``DeepSpeedZeroOptimizer`` (gradient partitioning, bucketed
reductions, partitioned momentum, parameter all-gather) so the model's claim "same math, ZeRO's wire
pattern" can be checked against the real thing. DeepSpeed does its own communication over the default
process group, which the harness cannot route through ``ctx.comm``; so the arm charges the virtual clock
with :meth:`distrepro.api.method.Comm.charge`, the accounting-only hook: one reduce-scatter and one all-gather of
the (padded) gradient vector per step, exactly what ``deepspeed_zero`` charges, so both arms have the
same emulated time and bytes and differ only in who does the math. Floating buffers are broadcast
through ``ctx.comm`` (real data, charged) as in ``deepspeed_zero``.

Only on ``engine: dist`` (``skip`` says why otherwise) and only with the optional extra installed
(``pip install -e ".[deepspeed]"``): DeepSpeed needs a real process group, and it JIT-compiles a
C++ extension on first start (≈ 60 s), kept in the repository's gitignored ``.torch_extensions/``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import math
import os
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field

from distrepro import api

EXTENSIONS_DIR = Path(__file__).resolve().parents[2] / ".torch_extensions"


class Params(api.MethodParams):
    lr: api.PeakLR = 0.05
    momentum: api.Momentum = 0.9
    weight_decay: api.WeightDecay = 0.0
    stage: Literal[1, 2] = 2
    #: DeepSpeed's global gradient-norm clip. 0 = off, as DDP and ``deepspeed_zero`` do; DeepSpeed's own
    #: default became 1.0 in June 2026 (microsoft/DeepSpeed#8068, was 0.0), so it is always set explicitly
    gradient_clipping: float = Field(default=0.0, ge=0)


def unavailable_reason() -> str | None:
    """Why the real arm cannot run in this process (None if it can); cheap: imports nothing heavy."""
    try:
        found = importlib.util.find_spec("deepspeed") is not None
    except (ImportError, ValueError):  # a broken or blocked install counts as absent
        found = False
    if not found:
        return 'DeepSpeed is not installed (optional extra: pip install -e ".[deepspeed]")'
    if not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return "needs a real process group: run it with engine: dist (the in-process engine has none)"
    return None


@contextlib.contextmanager
def _quiet_deepspeed() -> Iterator[None]:
    """Hold back DeepSpeed's start-up chatter, printed once per rank (8x on C-ADP's cluster): its
    extension-build print and its "untested optimizer" warning (we allow SGD on purpose). Errors raise."""
    ds_logger = logging.getLogger("DeepSpeed")
    level = ds_logger.level
    ds_logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        ds_logger.setLevel(level)


def _owners(module: torch.nn.Module) -> list[Any]:
    return [*module.modules(), *module.parameters()]


def _hooks(module: torch.nn.Module) -> dict[tuple[Any, str], set[Any]]:
    """Keys of every hook table on ``module``, its submodules and its parameters (to undo DeepSpeed's)."""
    out: dict[tuple[Any, str], set[Any]] = {}
    for owner in _owners(module):
        for attr, table in vars(owner).items():
            if attr.endswith("hooks") and isinstance(table, dict):
                out[(owner, attr)] = set(table)
    return out


class Method(api.Method[Params]):
    name = "deepspeed_real"
    synchronous = True
    requires: ClassVar[Mapping[str, str]] = {"deepspeed": 'optional extra: pip install -e ".[deepspeed]"'}

    def skip(self, cluster: api.ClusterLayout) -> str | None:
        return unavailable_reason()

    @classmethod
    def plan(cls, params: Params, setting: api.PlanSetting) -> api.MethodPlan | None:
        """What the arm charges per step (DeepSpeed's own traffic is not routed through ``ctx.comm``): one
        reduce-scatter and one all-gather of the flat gradient vector, as ``deepspeed_zero``, and the floating
        buffers' broadcast."""
        comm = [api.Transfer("reduce_scatter", setting.model_bytes), api.Transfer("all_gather", setting.model_bytes)]
        if setting.state_bytes > setting.model_bytes:
            comm.append(api.Transfer("broadcast", setting.state_bytes - setting.model_bytes))
        return api.MethodPlan(transfers=tuple(comm), facts={"stage": params.stage, "charged_as": "deepspeed_zero"})

    def setup(self, ctx: api.WorkerContext) -> None:
        os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(EXTENSIONS_DIR))
        # DeepSpeed reads its rank from the launcher's variables; our file-rendezvous launcher sets none
        for key, value in (("RANK", ctx.rank), ("LOCAL_RANK", ctx.rank), ("WORLD_SIZE", ctx.world_size)):
            os.environ.setdefault(key, str(value))
        os.environ.setdefault("LOCAL_WORLD_SIZE", str(ctx.world_size))
        if ctx.device.type == "cpu":  # say so, rather than have DeepSpeed warn that it guessed
            os.environ.setdefault("DS_ACCELERATOR", "cpu")
        # DeepSpeed's own call into a collective torch deprecates; not ours to act on
        warnings.filterwarnings("ignore", message=r".*all_gather_into_tensor.*", category=FutureWarning)
        import deepspeed  # optional extra: imported only where skip() said it can run

        p = self.params
        module = ctx.model
        numel = sum(q.numel() for q in module.parameters())
        # the bytes deepspeed_zero charges: the flat gradient vector padded to a multiple of the world size
        self.vector_bytes = math.ceil(numel / ctx.world_size) * ctx.world_size * 4
        self.buffers = api.float_buffers(module)
        optimizer = torch.optim.SGD(module.parameters(), lr=p.lr, momentum=p.momentum, weight_decay=p.weight_decay)
        config: dict[str, Any] = {
            "train_micro_batch_size_per_gpu": 1,  # bookkeeping only: batches come from the harness
            "gradient_accumulation_steps": 1,
            "zero_optimization": {"stage": p.stage, "overlap_comm": False, "contiguous_gradients": True},
            "zero_allow_untested_optimizer": True,
            "gradient_clipping": p.gradient_clipping,
            "steps_per_print": 10**9,
            "wall_clock_breakdown": False,
        }
        before = _hooks(module)
        attrs_before = {id(o): set(vars(o)) for o in _owners(module)}
        with _quiet_deepspeed():
            self.engine, self.optimizer, _, _ = deepspeed.initialize(model=module, optimizer=optimizer, config=config)
        self.module = module
        ctx.register_optimizer(self.optimizer)  # DeepSpeed's param groups: the harness's schedule sets their LR
        self._added_hooks = {k: set(v) - before.get(k, set()) for k, v in _hooks(module).items()}
        self._added_attrs = [(o, set(vars(o)) - attrs_before.get(id(o), set())) for o in _owners(module)]

    def finalize(self, ctx: api.WorkerContext) -> None:
        """Detach DeepSpeed from the module: its hooks are closures that the result pickle and the
        harness's evaluation must not carry (the engine itself is dropped with the method)."""
        self.engine.destroy()
        for (owner, attr), keys in self._added_hooks.items():
            table = getattr(owner, attr, None)
            for key in keys:
                if isinstance(table, dict):
                    table.pop(key, None)
        for owner, names in self._added_attrs:  # e.g. process-group handles DeepSpeed sets on parameters
            for attr in names:
                delattr(owner, attr)

    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:
        # The harness's forward_backward charges the compute; the forward runs through the engine so
        # that DeepSpeed's backward hooks (prologue, ZeRO gradient reduction, epilogue) fire on
        # loss.backward(). Gradients are DeepSpeed's to clear (its step() does), hence zero_grad=False.
        ctx.forward_backward(batch, zero_grad=False, forward_with=self.engine)
        self.engine.step()  # real ZeRO step: partition update + parameter all-gather (DeepSpeed's traffic)
        ctx.comm.charge("reduce_scatter", self.vector_bytes)
        ctx.comm.charge("all_gather", self.vector_bytes)
        api.broadcast_buffers(ctx.comm, self.buffers)

    def state_dict(self) -> dict[str, Any]:
        """No checkpoint support: DeepSpeed's partitioned optimizer state has its own format."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            raise ValueError("deepspeed_real cannot resume from a checkpoint (partitioned optimizer state)")
