"""Input checks shared by the core modules: one-line errors that name the offending field."""

from __future__ import annotations

import numpy as np


def finite_vector(x: object, n: int, field: str, error: type[ValueError] = ValueError,
                  allow_scalar: bool = False) -> np.ndarray:
    """``x`` as a float array of shape (n,) with finite entries, else ``error`` with one line naming the field
    and, for a non-finite value, its first offending entry (``q[2]: not a finite number (nan)``).

    ``allow_scalar`` accepts a plain number where n == 1. Each module passes its own ValueError subclass, so
    callers can tell which layer refused the input.
    """
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise error(f"{field}: expected {n} numbers") from None
    if allow_scalar and arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.shape != (n,):
        raise error(f"{field}: expected {n} values, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise error(f"{field}[{bad}]: not a finite number ({arr[bad]})")
    return arr
