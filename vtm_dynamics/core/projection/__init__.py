"""Aghili, *Control and Simulation of Motion of Constrained Multibody Systems Based on Projection Matrix
Formulation*: the SVD null-space projector P of the constraint matrix and the constrained dynamics through
singular and redundant constraints (eqs. (8)-(32): constraint inertia matrices, direct dynamics, constraint
forces), the projected inverse-dynamics controller with minimum-norm torques, unit weighting and passive joints
(eqs. (40)-(64)), and the simulation recipe of Sec. 6 with the pseudo-inverse Newton drift correction (eq. (39)).

Modules: ``projector`` (P, Mc, direct dynamics, constraint forces), ``control`` (projected inverse dynamics,
passive joints, controllability), ``simulation`` (constrained simulation steps and runs), ``desired_trajectory``
(the desired motion q_d(t) and its derivatives from waypoints, and its limit check).
"""
