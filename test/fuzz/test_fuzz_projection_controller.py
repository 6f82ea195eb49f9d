"""Property-based fuzzing of projection_controller, in process: joint states, trajectories and lock events go
straight to its callbacks, and one control cycle runs after each.

Properties: no exception escapes, no callback or cycle blocks longer than ``CALLBACK_BOUND_S``; at most one
warning/error line per distinct problem of an input, naming the field; every effort it publishes is finite and
within the URDF effort limit of its joint (read here from the URDF file, independently of the node); afterwards a
valid state and a valid hold trajectory give a finite command within the limits again.
"""

from __future__ import annotations

import math
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import rclpy
from builtin_interfaces.msg import Time
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rclpy.parameter import Parameter
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from vtm_msgs.msg import LockEvent

from test.fuzz import strategies as S
from test.fuzz.harness import (
    CALLBACK_BOUND_S,
    LogCapture,
    check_outcome,
    deliver,
    init_ros,
    projection_controller_adapter,
    projection_controller_commands,
    projection_controller_cycle,
    surveyable,
)
from test.fuzz.scale import examples

BRANCH = np.array([1.0, -2.0, 1.0])  # slider-crank branch q = BRANCH * theta (docs of urdf/slider_crank.urdf)
THETA = 0.3  # [rad] a configuration on the branch, away from the singular crank angles +-pi/2


def effort_limits(urdf: str) -> dict[str, float]:
    """<limit effort=...> of every joint of the URDF text, read with xml.etree (not with the node's model)."""
    root = ET.fromstring(urdf)
    return {j.get("name"): float(j.find("limit").get("effort")) for j in root.findall("joint")
            if j.find("limit") is not None}


class Rig:
    def __init__(self, *parameters: Parameter) -> None:
        """The slider-crank controller; ``parameters`` are added to its ``urdf_path``."""
        import os

        from vtm_dynamics.core.package_data import package_data_file
        from vtm_dynamics.nodes.projection_controller import ProjectionController

        init_ros()
        self.capture = LogCapture().install()
        path = package_data_file("urdf", "slider_crank.urdf")
        self.node = ProjectionController(parameter_overrides=[Parameter("urdf_path", value=path), *parameters])
        self.a = projection_controller_adapter(self.node)
        self.cycle = projection_controller_cycle(self.node)
        self.commands = projection_controller_commands(self.node)
        self.limits = effort_limits(S.slider_crank_urdf())
        self.q = BRANCH * THETA

    def valid_state(self):
        stamp = self.node.get_clock().now().to_msg()
        return S.valid_joint_state(S.SLIDER_CRANK_JOINTS, self.q, [0.0] * 3, stamp)

    def hold_trajectory(self) -> JointTrajectory:
        msg = JointTrajectory(joint_names=list(S.SLIDER_CRANK_JOINTS))
        point = JointTrajectoryPoint(positions=[float(x) for x in self.q], velocities=[0.0] * 3)
        point.time_from_start.nanosec = 100_000_000
        msg.points = [point]
        return msg

    def run_cycle(self, context: str) -> None:
        n = len(self.commands)
        mark = self.capture.mark()
        t0 = time.perf_counter()
        self.cycle()
        took = time.perf_counter() - t0
        assert took <= CALLBACK_BOUND_S, f"{context}: a control cycle took {took:.3f} s"
        lines = self.capture.since(mark, "projection_controller")
        assert len(lines) <= 1, f"{context}: {len(lines)} lines in one control cycle: {[x.text for x in lines]}"
        for effort in self.commands[n:]:
            check_efforts(self, effort, context)

    def close(self) -> None:
        self.capture.uninstall()
        self.node.destroy_node()
        rclpy.try_shutdown()  # later modules call rclpy.init() themselves


def check_efforts(rig: Rig, effort: list[float], context: str) -> None:
    joints = list(S.SLIDER_CRANK_JOINTS)  # commanded joints: all model joints in model order (no passive ones)
    assert len(effort) == len(joints), f"{context}: {len(effort)} efforts for {len(joints)} joints"
    for name, tau in zip(joints, effort):
        assert math.isfinite(tau), f"{context}: non-finite effort {tau} for {name}"
        assert abs(tau) <= rig.limits[name] * (1 + 1e-9), \
            f"{context}: effort {tau:.6g} for {name} exceeds its URDF limit {rig.limits[name]:g}"


@pytest.fixture(scope="module")
def rig():
    r = Rig()
    r.a.inputs["joint_states"](r.valid_state())
    r.a.inputs["trajectory"](r.hold_trajectory())
    r.run_cycle("start-up")
    yield r
    r.close()


TOPICS = st.one_of(
    S.joint_states(known=S.SLIDER_CRANK_JOINTS).map(lambda c: ("joint_states", c)),
    S.joint_trajectories().map(lambda c: ("trajectory", c)),
    S.lock_events(known=S.SLIDER_CRANK_JOINTS).map(lambda c: ("lock_events", c)),
)


def huge_target(value: float) -> tuple[str, S.Case]:
    msg = JointTrajectory(joint_names=list(S.SLIDER_CRANK_JOINTS))
    point = JointTrajectoryPoint(positions=[value] * 3)
    point.time_from_start.sec = 1
    msg.points = [point]
    return "trajectory", S.Case(msg, True, f"target {value:g} rad")


@settings(max_examples=examples(300))
@given(TOPICS)
@example(("joint_states", S.Case(S.AtRunTime(lambda now: S.valid_joint_state(
    S.SLIDER_CRANK_JOINTS + ("x" * 10_000,), [0.0] * 4, [0.0] * 4, Time(sec=now)), "stamped now"), True,
                                 "an unknown joint name of 10,000 characters")))
@example(("lock_events", S.Case(LockEvent(joint_names=["y" * 10_000], action=LockEvent.LOCK), True,
                                "LOCK of an unknown joint named by 10,000 characters")))
@example(("lock_events", S.Case(LockEvent(joint_names=[], action=LockEvent.UNLOCK), True, "UNLOCK naming no joint")))
@example(("joint_states", S.Case(S.AtRunTime(lambda now: S.valid_joint_state(
    S.SLIDER_CRANK_JOINTS, BRANCH * THETA, [], Time(sec=now + 1000)), "stamped now + 1,000 s"),
                                 True, "a joint state stamped 1,000 s in the future")))
@example(huge_target(1e6))
@example(huge_target(1e300))
@surveyable
def test_inputs_and_control_cycle(rig, topic_case):
    topic, case = topic_case
    rig.a.reset_log_limits()
    if topic != "joint_states":  # keep the state fresh so that the control law runs
        rig.a.inputs["joint_states"](rig.valid_state())
    out = deliver(rig.a, rig.capture, rig.a.inputs[topic], S.message_of(case.msg))
    check_outcome(rig.a, topic, out, case.bad, case.note)
    rig.run_cycle(f"control cycle after {topic} ({case.note})")


def test_still_controls_after_the_fuzz_batch(rig):
    from vtm_msgs.msg import LockEvent

    rig.a.inputs["lock_events"](LockEvent(joint_names=list(S.SLIDER_CRANK_JOINTS), action=LockEvent.UNLOCK))
    rig.a.inputs["joint_states"](rig.valid_state())
    rig.a.inputs["trajectory"](rig.hold_trajectory())
    n = len(rig.commands)
    rig.run_cycle("after the fuzz batch")
    assert len(rig.commands) > n, "no command published after the fuzz batch"
    assert any(x != 0.0 for x in rig.commands[-1]), \
        "after the fuzz batch a valid state and hold trajectory give a zero command (controller not running)"
