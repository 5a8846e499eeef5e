"""An exact, hashable key of a small pandas table's content, for memoising pure functions of the table.

Two tables get the same key only if a function of their labels, dtypes and cells cannot tell them apart: the
kinds, names and dtypes (exact ones only: NumPy, string, zoned datetime) of both axes and of every column, every
label and every cell, each by its type and exact value (a float by its eight bytes, so ``-0.0`` and ``0.0`` differ
and a NaN equals a NaN, which a tuple of floats would not give; ``1``, ``1.0`` and ``True`` differ by type; a
Timestamp by its integer, unit and zone). A table holding anything else (a list, a Decimal, a categorical, metadata
in ``attrs``) gets no key and its caller computes afresh: a key is never approximate. The cells are read in one
pass (``to_numpy(dtype=object)``), not a Series per column, which cost more than the computation the key saves.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pandas as pd

#: cells keyed by (type, value): immutable types whose equality is exact (floats are keyed by their bytes)
_PLAIN = (str, int, bool, type(None))
_DOUBLE = struct.Struct("<d")
#: column dtypes whose equality is exact (byte order, storage, NA value, unit and zone); a categorical's would not be
_EXACT_DTYPES = (np.dtype, pd.StringDtype, pd.DatetimeTZDtype)


def table_key(frame: pd.DataFrame) -> tuple[Any, ...] | None:
    """The content key of ``frame``, or ``None`` where a cell or label is of a kind not keyed exactly."""
    if frame.attrs:
        return None
    try:
        axes = (_axis(frame.columns), _axis(frame.index))
        dtypes = tuple(frame.dtypes)
        if not all(isinstance(d, _EXACT_DTYPES) for d in dtypes):
            return None
        cells = _cells(frame.to_numpy(dtype=object).ravel().tolist())
    except _NotKeyed:
        return None
    return (frame.flags.allows_duplicate_labels, frame.shape, axes, dtypes, cells)


class _NotKeyed(Exception):
    """A label or cell of a kind :func:`table_key` does not key exactly."""


def _axis(index: pd.Index) -> tuple[Any, ...]:
    if not isinstance(index.dtype, _EXACT_DTYPES):
        raise _NotKeyed(repr(index.dtype))
    return (type(index).__name__, index.dtype, tuple(index.names), _cells(index.tolist()))


def _cells(values: list[Any]) -> tuple[Any, ...]:
    out: list[Any] = []
    for v in values:
        kind = type(v)
        if kind is float:
            out.append((kind, _DOUBLE.pack(v)))
        elif kind in _PLAIN:
            out.append((kind, v))
        elif kind is pd.Timestamp:
            out.append((kind, int(v.asm8.view("i8")), v.unit, repr(v.tz)))
        elif v is pd.NaT or v is pd.NA:
            out.append((repr(v),))
        else:
            raise _NotKeyed(kind.__name__)
    return tuple(out)
