"""Stop-safe motion (Müller 2026, Sec. 1: "safe motion planning ensuring that at any time the system can be
stopped"): does every emergency stop along a planned trajectory end clear of the scene, how fast may the motion
run so that it always does, and the safety distances of ISO 13855 and ISO/TS 15066 from predicted stops.

The stops are the braked, locking motions of Müller 2026, eqs. (3) and (22) (:mod:`vtm_dynamics.core.estop`),
predicted over the envelope's cases through ONE entry point (:func:`.stop_cases.predict_stops`). Modules:
:mod:`.trajectory` (JointTrajectory semantics, interpolation, re-timing, limits), :mod:`.trajectory_files` (YAML
and CSV), :mod:`.scene` (obstacles as SolidPrimitive / Mesh, floor, self-collision; the YAML scene file),
:mod:`.robot_geometry` (the URDF's collision geometry through Pinocchio and coal, batched kinematics, displacement
bounds), :mod:`.broad_phase` (scene bodies and lower bounds for many poses), :mod:`.sweep` (the smallest clearance
along predicted stops, branch and bound), :mod:`.sampling` (E-stop instants and the bound between them),
:mod:`.check` (the facade :class:`~.check.TrajectoryChecker`), :mod:`.speed_scaling` (bisection on the check),
:mod:`.results`, :mod:`.iso13855` (S = K T + C) and :mod:`.separation` (ISO/TS 15066 protective separation
distance, live and over a workspace map). docs/stopsafe.md is the guide.
"""
