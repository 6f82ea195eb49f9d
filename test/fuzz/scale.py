"""Example counts of the fuzz tests: the numbers in the tests are the CI budget (all in-process fuzz tests
together stay around a minute on a shared 2-core machine); ``VTM_FUZZ_SCALE`` multiplies them for a longer search."""

from __future__ import annotations

import os


def examples(n: int) -> int:
    try:
        scale = float(os.environ.get("VTM_FUZZ_SCALE", "1"))
    except ValueError:
        scale = 1.0
    return max(1, int(n * scale))
