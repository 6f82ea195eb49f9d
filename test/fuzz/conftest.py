"""Hypothesis settings profiles of the fuzz tests (registered here, not in the project-wide conftest).

``ci``   chosen when ``CI=true``: derandomized (the same examples every run, so a failure reproduces), no example
         database, no deadline (the machine is shared; time bounds are explicit assertions), no shrinking (a
         failing example is printed as generated, which keeps a failing run bounded in time).
``dev``  otherwise: random examples each run, shrinking on, no database on disk either (run a failing test again
         with ``HYPOTHESIS_PROFILE=ci`` to reproduce the CI example, or with ``--hypothesis-seed=N``).

``explore`` like ``ci`` but without the explicit examples (the issue's reproduced cases): to survey what the
         generated inputs find when an explicit example already fails (Hypothesis stops at a failing explicit one).

``explicit`` only the explicit examples (the issue's reproduced cases), as ``ci`` otherwise: what
         ``test/test_suite_clocks.py`` runs with the clock moved between collection and run.

``HYPOTHESIS_PROFILE`` overrides the choice. ``VTM_FUZZ_SCALE`` (default 1) multiplies every test's example
count, for a longer search on a developer machine.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

_QUIET_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                 HealthCheck.function_scoped_fixture, HealthCheck.large_base_example]

settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, max_examples=200, print_blob=True,
    suppress_health_check=_QUIET_CHECKS,
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target),
)
settings.register_profile(
    "explore", derandomize=True, database=None, deadline=None, print_blob=True, suppress_health_check=_QUIET_CHECKS,
    phases=(Phase.generate,),
)
settings.register_profile(
    "explicit", derandomize=True, database=None, deadline=None, print_blob=True, suppress_health_check=_QUIET_CHECKS,
    phases=(Phase.explicit,),
)
settings.register_profile("dev", database=None, deadline=None, print_blob=True, suppress_health_check=_QUIET_CHECKS)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") == "true" else "dev"))


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "dds_fuzz: fuzzing over real DDS (loopback); bounded in time, part of the "
                                       "default run")
