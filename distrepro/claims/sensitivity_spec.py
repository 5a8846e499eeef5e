"""``setup.sensitivity`` in ``paper.yaml``: the sweep's size and the method assumptions it varies.

Hardware uncertainty lives in the profiles (:mod:`distrepro.hardware.profile_ranges`). What a reproduction had to
*reconstruct* about a method (C-ADP's synchronisation period, which the paper does not state) is an
assumption of the paper's arms and lives here, beside the claims it can overturn:

.. code-block:: yaml

    setup:
      sensitivity:
        samples: 256          # Latin-hypercube settings (default 256)
        assumptions:
          - arm: cadp
            param: round_epochs   # a numeric method parameter of the arm
            low: 1
            high: 8
            reason: "one PS sync per proxy epoch (2,048 samples) to one per 16,384 (the whole budget)"

The arm's configured value is the central value and must lie inside ``[low, high]`` (checked when
the sweep builds the arm's runs, where the value is known).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from distrepro.hardware.profile_ranges import FigureRange


class Assumption(FigureRange):
    """A reconstructed method parameter of one arm and its plausible range."""

    arm: str = Field(min_length=1)
    param: str = Field(min_length=1)
    #: judge it only at this scale (a proxy's round length is not the paper-scale one); None = any
    at_scale: str | None = Field(default=None, pattern="^(proxy|paper)$")

    @property
    def variable(self) -> str:
        return self.name or f"{self.arm}.{self.param}"


class SensitivitySpec(BaseModel):
    """How large a sweep ``--sensitivity`` runs, and which method assumptions it varies."""

    model_config = ConfigDict(extra="forbid")

    samples: int = Field(default=256, ge=8, le=100_000)
    seed: int = 0
    assumptions: list[Assumption] = Field(default_factory=list)
