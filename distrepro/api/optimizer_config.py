"""The ``optimizer:`` block of a run config or a method's params, without importing torch.

Kept apart from :mod:`distrepro.training.optimizers` (which builds the optimizers and needs torch) so that a run
config can be validated, and the command line can report a config error, before torch is imported.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Name = Literal["sgd", "adam", "adamw", "accum_adam", "accum_adamw"]


class OptimizerConfig(BaseModel):
    """One optimizer's hyperparameters; fields that do not apply to ``name`` are ignored."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: Name = "sgd"
    lr: float = Field(default=0.1, gt=0)
    momentum: float = Field(default=0.0, ge=0, lt=1)
    nesterov: bool = False
    weight_decay: float = Field(default=0.0, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = Field(default=1e-8, gt=0)
    accum_iter: int = Field(default=4, ge=1, description="AccumAdam(W): steps per moment refresh")
