"""Default settings of the solvability analysis (Wojtyra & Frączek 2013), in a module without imports, so that a
command line can show them in ``--help`` without loading the numerical libraries. :mod:`solvability` and
:mod:`solvability_along_motion` use and re-export them.
"""

DEFAULT_RANK_RTOL = 1e-9  # relative rank tolerance: singular values above this x sigma_max count
# Moving links accepted by default (checked while the URDF text is parsed, before Pinocchio sees the text, which
# crashed the process on a 10,000-link chain). The sparse path handles thousands of bodies in seconds
# (bench_solvability); callers with such a model raise ``max_bodies`` (the command line's ``--max-bodies``)
# knowingly, and the byte and degree-of-freedom caps follow it (load_for_analysis).
DEFAULT_MAX_SOLVABILITY_BODIES = 50
# unique_reactions solves the dense KKT system and Pinocchio's Data costs ~66 B x nv^3: small models only.
DEFAULT_MAX_REACTION_BODIES = 50
METHODS = ("auto", "dense", "sparse")
DEFAULT_MAX_SAMPLES = 10_000  # along a motion: one analysis per sample, ~10 ms each for a 7-body model
