"""Joint reactions of multibody models. Wojtyra and Frączek, *Solvability of reactions in rigid multibody systems
with redundant nonholonomic constraints*: the constraint matrix in absolute coordinates (one body pose per link,
holonomic and Pfaffian rows), its rank and redundancy, and the per-pair test of which reaction components are
unique (the direct-sum criterion and the QR-based B_X test of Sects. 3-4). The Taylor-expansion reaction
formulation of Huang et al. will live here too.

Modules: ``absolute_coordinates`` (bodies, poses, twists, dynamics and constraint rows in absolute coordinates),
``solvability`` (rank, redundancy, per-pair verdicts and unique directions).
"""
