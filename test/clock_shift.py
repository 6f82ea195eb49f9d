"""A pytest plugin that moves the wall clock between collection and the run (``-p test.clock_shift``).

While pytest collects (imports the test modules, evaluates decorators such as Hypothesis' ``@example``), Python's
``time.time`` and ``time.time_ns`` read ``VTM_CLOCK_SHIFT_S`` seconds (default 2,000) earlier than the real clock;
afterwards they read the real clock again. To the tests this is a suite that took that long to reach them, as on
a slow or loaded machine: a stamp built from the clock at import is that far in the past when the test runs, while
the nodes under test (whose clocks are read in C) see the real time. ``test/test_suite_clocks.py`` runs the
fuzz tests' explicit examples under it.
"""

from __future__ import annotations

import os
import time

import pytest

_SHIFT_S = float(os.environ.get("VTM_CLOCK_SHIFT_S", "2000"))


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    real_time, real_time_ns = time.time, time.time_ns
    time.time = lambda: real_time() - _SHIFT_S
    time.time_ns = lambda: real_time_ns() - int(_SHIFT_S * 1e9)
    try:
        yield
    finally:
        time.time, time.time_ns = real_time, real_time_ns
