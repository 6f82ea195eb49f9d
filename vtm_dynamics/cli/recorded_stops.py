"""Where the joint states and the trigger are in a bag, as command-line options, and the stops read with them.

Shared by ``vtm-calibrate`` (stops to fit) and ``vtm-predict --bag`` (stops to replay): the options name the
joint-state topic, the trigger (topic, type, field, stopping values) and the rest rule; :func:`read_stops` reads
every bag (:mod:`vtm_dynamics.recordings`) and finds its stops. The bag readers are imported only when stops are
read, so that a tool builds its parser (``--help``, usage errors) without them.
"""

from __future__ import annotations

import argparse
from typing import Sequence



SHORTFALL_TOLERANCE = 0.05  # a stop time or TCP distance predicted this much shorter than recorded is non-conservative
EXIT_NONCONSERVATIVE = 3  # the exit status of a tool whose brakes predict a recorded stop short


def shortfall_line(short: Sequence, tolerance: float, figures: str = "stop figure(s) predicted") -> str:
    """The verdict line of :func:`vtm_dynamics.core.estop.stop_comparison.shortfalls` (non-empty): how many stop
    ``figures`` are shorter than recorded beyond ``tolerance`` (relative), and the worst (a stop the engine could
    not predict with the engine's reason, not only "not at rest")."""
    import math

    worst = min(short, key=lambda s: s.relative if math.isfinite(s.relative) else -math.inf)
    what = {"time": "stop time", "tcp": "TCP distance"}[worst.what]
    failure = getattr(worst, "failure", "")
    rel = (f"{100 * worst.relative:+.1f} %" if math.isfinite(worst.relative) else
           f"not predicted: {failure}" if failure else "not at rest")
    return (f"non-conservative: {len(short)} {figures} shorter than recorded by more than {100 * tolerance:g} % "
            f"(worst {worst.label} {what} {rel})")


def add_recording_options(ap: argparse.ArgumentParser) -> None:
    """The options that say where the joint states and the trigger are in a bag."""
    from vtm_dynamics.recordings.bag_files import DEFAULT_JOINT_TOPIC
    from vtm_dynamics.recordings.rest import REST_HOLD, REST_TOLERANCE, REST_TOLERANCE_LINEAR

    ap.add_argument("--joint-topic", default=DEFAULT_JOINT_TOPIC, help="sensor_msgs/JointState topic")
    ap.add_argument("--trigger-topic", default="/estop", help="trigger topic (default /estop)")
    ap.add_argument("--trigger-type", default="std_msgs/msg/Bool", help="trigger type <pkg>/msg/<Type>")
    ap.add_argument("--trigger-field", default="data", help="field of the trigger type (dotted path)")
    ap.add_argument("--trigger-values", nargs="+", default=["true"],
                    help="values of the field that mean stopping (true/false, numbers or constant names)")
    ap.add_argument("--rest-tolerance", type=float, default=REST_TOLERANCE,
                    help="rest: every revolute or continuous joint within this [rad] ...")
    ap.add_argument("--rest-tolerance-linear", type=float, default=REST_TOLERANCE_LINEAR,
                    help="... and every prismatic joint within this [m] ...")
    ap.add_argument("--rest-hold", type=float, default=REST_HOLD, help="... for this long [s]")


def read_stops(bags: Sequence[str], robot, args: argparse.Namespace, say=print) -> list:
    """Every stop of every bag, in order, as RecordedStop (errors are RecordingError, one line)."""
    from vtm_dynamics.recordings.bag_files import read_recording
    from vtm_dynamics.recordings.stops import find_stops, foreign_joints
    from vtm_dynamics.recordings.trigger import rule_from_parameters

    rule = rule_from_parameters(args.trigger_topic, args.trigger_type, args.trigger_field, args.trigger_values)
    stops = []
    for bag in bags:
        rec = read_recording(bag, rule, args.joint_topic, joints=robot.joint_names)
        found = find_stops(rec, robot, rest_tolerance=args.rest_tolerance, rest_hold=args.rest_hold,
                           rest_tolerance_linear=args.rest_tolerance_linear)
        foreign = foreign_joints(rec, robot)
        left_out = f"; left out, not in the model: {', '.join(foreign[:8])}{' ...' if len(foreign) > 8 else ''}" \
            if foreign else ""
        for names, count in rec.other_publishers:
            shown = ", ".join(names[:4]) + (" ..." if len(names) > 4 else "")
            left_out += f"; left out, another publisher: {count} joint states of {shown}"
        say(f"{rec.name}: {rec.storage}, {rec.joints.t.size} joint states, {len(found)} stop(s){left_out}")
        stops.extend(found)
    return stops
