"""Müller, *Forward Dynamics of Variable Topology Mechanisms - The Case of Constraint Activation*: what happens
when constraints switch on. The momentum-consistent velocity jump at activation in its three equivalent forms
(KKT eqs. (22)/(24), redundant coordinates with the M-weighted null-space projector eq. (32), minimal coordinates /
Voronets eq. (37)) and the closed form for joint locks; the set of active constraints (topology); the event-driven
integrator of the constrained equations of motion (eq. (3)) between switching events; and the invariants that
check a simulation (momenta of the free coordinates, energy, constraint residuals; Sec. 6, Figs. 2 and 4).

Modules: ``transitions`` (jumps, eqs. (21)-(24), (32), (37)), ``topology`` (active set), ``integrator``
(simulation between events), ``diagnostics`` (invariants).
"""
