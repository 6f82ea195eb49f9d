"""vtm_dynamics: dynamics, prediction and control of robots whose kinematic topology changes.

`vtm_dynamics.core` holds the physics (numpy, scipy, Pinocchio; never rclpy), `vtm_dynamics.nodes` the thin
rclpy nodes, `vtm_dynamics.cli` the command-line tools.
"""

__version__ = "0.1.0"
