"""Stopping data over many states (ISO 10218-1 test matrices, workspace stopping maps), built on the E-stop
prediction of :mod:`vtm_dynamics.core.estop` (Müller 2026, eqs. (3), (22) with brakes).

Modules: :mod:`.iso10218` (the ISO 10218-1 style test matrix: stop categories 0 and 1, the three joints with the
greatest displacement, 33/66/100 % of speed x extension x payload, stated test motions, the envelope band) and
:mod:`.workspace_map` (seeded per-chunk sampling of states inside joint limits and an optional Cartesian cell box,
the evaluation of one chunk, and the reduction of rows to worst cases and distributions). Neither runs anything in
parallel: the engine lives outside the core (``vtm_dynamics.scaleout``).
"""
