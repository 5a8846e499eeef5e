"""The validation's constants with and without a source: the folds of its leave-one-source-out score.

Why a module of its own: a source whose points chose a constant is close to them by construction, so each source
is scored with every constant derived without it (:func:`fold`); this is that derivation, apart from the scoring
in ``benchmarks/validate_emulator.py``.
"""

from __future__ import annotations

import copy
import statistics
from typing import Any


def _tau_from_rows(data: dict[str, Any], rows: list[tuple[float, float]], model: str, gpu: str) -> float:
    """tau (ms per sublayer, V100) from (tokens per GPU, tok/s) rows of one model on one GPU: the least-squares
    intercept of step time against tokens, per sublayer, over the GPU's tau ratio."""
    xs = [float(tokens) for tokens, _ in rows]
    ys = [tokens / tok_s for tokens, tok_s in rows]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    intercept = my - slope * mx
    return intercept / data["models"][model]["sublayers"] / data["gpus"][gpu]["tau_ratio"] * 1000.0


#: how a constant with ``from_points`` is derived from (some of) them
DERIVATIONS = {"tau_v100_ms": _tau_from_rows}


def fold(data: dict[str, Any], held_out: str | None = None) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``data`` with every constant derived without the source ``held_out`` (``None``: from every source), and per
    constant its value, the sources it came from and how.

    A constant with ``from_points`` is derived (:data:`DERIVATIONS`) from those of its points not of ``held_out``
    (two at least); one whose every origin (``from_points``' sources, ``from_sources``) is ``held_out`` takes its
    ``fallback`` (a value, or rows of another source to derive it from), which must not be ``held_out``'s either;
    any other keeps its written value."""
    points = {p["id"]: p for p in data["points"]}
    out = copy.deepcopy(data)
    provenance: dict[str, dict[str, Any]] = {}
    for name, c in data["constants"].items():
        calibrating = [points[i] for i in c.get("from_points", [])]
        origins = {p["source"] for p in calibrating} | set(c.get("from_sources", []))
        kept = [p for p in calibrating if p["source"] != held_out]
        if len({(p["model"], p["gpu"]) for p in calibrating}) > 1:
            raise ValueError(f"constant {name}: its calibration points are not one model on one GPU")
        if calibrating and len(kept) >= 2:
            rows = [(p["tokens_per_gpu"], p["measured"]) for p in kept]
            value = DERIVATIONS[name](data, rows, kept[0]["model"], kept[0]["gpu"])
            came_from = sorted({p["source"] for p in kept})
            how = f"derived from {len(kept)} calibration points of {', '.join(came_from)}"
            if held_out in origins:
                how += f" (those of {held_out} left out)"
        elif held_out is not None and held_out in origins:
            fallback = c.get("fallback")
            if fallback is None or fallback.get("from_source") == held_out:
                raise ValueError(f"constant {name}: comes from {held_out} and has no fallback without it")
            if "rows" in fallback:
                rows = [(r["tokens_per_gpu"], r["tok_s"]) for r in fallback["rows"]]
                value = DERIVATIONS[name](data, rows, fallback["model"], fallback["gpu"])
            else:
                value = float(fallback["value"])
            came_from = [fallback["from_source"]] if "from_source" in fallback else []
            how = f"fallback without {held_out}: {fallback['source']}"
        else:
            value = float(c["value"])
            came_from = sorted(origins)
            how = c["source"]
        out["constants"][name]["value"] = value
        provenance[name] = {"value": value, "from": came_from, "how": how}
    return out, provenance


def validation_sources(data: dict[str, Any]) -> list[str]:
    return sorted({p["source"] for p in data["points"] if p.get("role", "validate") == "validate"})
