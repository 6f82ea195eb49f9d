"""The robot model and what it is read from: a Pinocchio model of a URDF (mass matrix, bias forces, frames,
Jacobians), the vtm_dynamics URDF extension elements (loop closures, knife edges, driving constraints) and the
constraint rows J(q) v = 0 they and joint locks contribute (Müller 2026, eq. (1)-(3): the constraints h(q) whose
activation the switching code handles; Aghili, eq. (1): the constraint matrix A(q)).

Modules: ``model`` (RobotModel), ``urdf_extension`` (URDF text and its extension elements), ``constraints``
(joint locks, loop closures, knife edges as constraint rows). Everything here takes URDF *text*; reading a file is
the caller's explicit choice.
"""
