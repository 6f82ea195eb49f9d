"""Numerical linear algebra shared by the groups: the numerical rank of a matrix, with its tolerance stated, and
the cross product of 3-vectors.

One function for every rank decision, so that "rank" means the same computation everywhere and each caller says
which tolerance it uses: relative to the largest singular value (Müller's transitions and Aghili's projector, where
the matrix's own scale is the reference) or absolute (the solvability test of Wojtyra and Frączek, where sub-blocks
are judged against the tolerance of the whole constraint matrix).
"""

from __future__ import annotations

import numpy as np


def numerical_rank(A: np.ndarray, *, rtol: float = 0.0, atol: float = 0.0) -> int:
    """Number of singular values of ``A`` above max(atol, rtol * sigma_max); 0 for an empty or zero matrix."""
    if A.size == 0:
        return 0
    s = np.linalg.svd(A, compute_uv=False)
    if s[0] == 0.0:
        return 0
    return int(np.sum(s > max(atol, rtol * s[0])))


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a x b over the last axis (length 3), broadcasting like ``numpy.cross`` and rounding like it (the same three
    products and differences per component), at a third of its cost on single vectors: the constraint rows of a
    closed chain call it several times per step."""
    a1, a2, a3 = a[..., 0], a[..., 1], a[..., 2]
    b1, b2, b3 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a2 * b3 - a3 * b2, a3 * b1 - a1 * b3, a1 * b2 - a2 * b1], axis=-1)
