"""The options that say where the joint states and the trigger are in a bag (``vtm-calibrate``, ``vtm-predict --bag``).

A module of its own so that a tool can build its parser (``--help``, usage errors) without importing the
identification and the bag readers.
"""

from __future__ import annotations

import argparse


def add_recording_options(ap: argparse.ArgumentParser) -> None:
    """The bag options shared by the tools that read recorded stops."""
    from vtm_dynamics.recordings.bag_files import DEFAULT_JOINT_TOPIC  # numpy only, not the bag readers' libraries

    ap.add_argument("--joint-topic", default=DEFAULT_JOINT_TOPIC, help="sensor_msgs/JointState topic")
    ap.add_argument("--trigger-topic", default="/estop", help="trigger topic")
    ap.add_argument("--trigger-type", default="std_msgs/msg/Bool", help="trigger type <pkg>/msg/<Type>")
    ap.add_argument("--trigger-field", default="data", help="field of the trigger type (dotted path)")
    ap.add_argument("--trigger-values", nargs="+", default=["true"],
                    help="values of the field that mean stopping (true/false, numbers or constant names)")
    ap.add_argument("--rest-tolerance", type=float, default=1e-3, help="rest: every joint within this [rad] ...")
    ap.add_argument("--rest-hold", type=float, default=0.2, help="... for this long [s]")
