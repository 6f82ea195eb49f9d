"""Property-based fuzzing of projection_controller's force-control and task-trajectory inputs, in process.

The constraint-wrench set point and measurement (geometry_msgs/WrenchStamped: any frame name, any numbers) and
trajectories of task coordinates go straight to their callbacks on a controller with force control on, and one
control cycle runs after each. Properties as for the other inputs (test_fuzz_projection_controller.py): no
exception escapes, bounded time, at most one line per problem naming the field, every published effort finite and
within the URDF limit of its joint; afterwards a valid state, trajectory and set point give a command again.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from geometry_msgs.msg import WrenchStamped
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rclpy.parameter import Parameter

from test.fuzz import strategies as S
from test.fuzz.harness import (
    NodeAdapter,
    check_outcome,
    deliver,
    surveyable,
)
from test.fuzz.scale import examples
from test.fuzz.test_fuzz_projection_controller import Rig, check_efforts

CLOSURE = "slider_guide"  # the loop closure of urdf/slider_crank.urdf


class ForceRig(Rig):
    """The slider-crank controller with force control on and the force measured from the topic."""

    def __init__(self) -> None:
        super().__init__(Parameter("force_control", value=True), Parameter("force_measurement", value="topic"))
        base, node = self.a, self.node
        self.a = NodeAdapter(
            node=node, logger=base.logger, inputs=base.inputs,
            vocabulary={**base.vocabulary, "task_trajectory": ("task_trajectory",),
                        "constraint_wrench_setpoint": ("constraint_wrench_setpoint",),
                        "constraint_wrench": ("constraint_wrench",)},
            forget=base.forget)


def wrench(name: str, values) -> WrenchStamped:
    msg = WrenchStamped()
    msg.header.frame_id = name
    f, m = msg.wrench.force, msg.wrench.torque
    f.x, f.y, f.z, m.x, m.y, m.z = (float(x) for x in values)
    return msg


@st.composite
def wrenches(draw) -> S.Case:
    """Set points and measurements: the model's closure or another name, ordinary to absurd numbers."""
    name = draw(st.one_of(st.just(CLOSURE), st.text(max_size=40), st.just("x" * 10_000)))
    big = draw(st.booleans())
    values = draw(st.lists(S.floats(lo=-1e9 if big else -50.0, hi=1e9 if big else 50.0), min_size=6, max_size=6))
    # certainly bad: a name that is no closure of the model, or a number that is not finite; large finite values
    # are refused by max_constraint_wrench, ordinary ones accepted: either may happen (None)
    bad = True if name != CLOSURE or not all(math.isfinite(v) for v in values) else None
    return S.Case(wrench(name, values), bad, f"wrench on {name[:20]!r}")


TOPICS = st.one_of(
    wrenches().map(lambda c: ("constraint_wrench_setpoint", c)),
    wrenches().map(lambda c: ("constraint_wrench", c)),
    S.joint_trajectories().map(lambda c: ("task_trajectory", S.Case(c.msg, True, "task trajectory, none configured"))),
)


@pytest.fixture(scope="module")
def rig():
    r = ForceRig()
    r.a.inputs["joint_states"](r.valid_state())
    r.a.inputs["trajectory"](r.hold_trajectory())
    r.run_cycle("start-up")
    yield r
    r.close()


@settings(max_examples=examples(200))
@given(TOPICS)
@example(("constraint_wrench_setpoint", S.Case(wrench(CLOSURE, [0, 0, 1e300, 0, 0, 0]), True, "1e300 N set point")))
@example(("constraint_wrench_setpoint", S.Case(wrench(CLOSURE, [0, 0, math.nan, 0, 0, 0]), True, "NaN set point")))
@example(("constraint_wrench", S.Case(wrench(CLOSURE, [math.inf] * 6), True, "infinite measurement")))
@example(("constraint_wrench_setpoint", S.Case(wrench(CLOSURE, [0, 0, 20.0, 0, 0, 0]), None, "20 N set point")))
@surveyable
def test_force_and_task_inputs_and_control_cycle(rig, topic_case):
    topic, case = topic_case
    rig.a.reset_log_limits()
    rig.a.inputs["joint_states"](rig.valid_state())  # keep the state fresh so that the control law runs
    out = deliver(rig.a, rig.capture, rig.a.inputs[topic], case.msg)
    check_outcome(rig.a, topic, out, case.bad, case.note)
    rig.run_cycle(f"control cycle after {topic} ({case.note})")


def test_still_controls_force_after_the_fuzz_batch(rig):
    rig.a.inputs["joint_states"](rig.valid_state())
    rig.a.inputs["trajectory"](rig.hold_trajectory())
    rig.a.inputs["constraint_wrench_setpoint"](wrench(CLOSURE, [0, 0, 20.0, 0, 0, 0]))
    rig.a.inputs["constraint_wrench"](wrench(CLOSURE, [0, 0, 15.0, 0, 0, 0]))
    n = len(rig.commands)
    rig.run_cycle("after the fuzz batch")
    assert len(rig.commands) > n, "no command published after the fuzz batch"
    assert np.all(np.isfinite(rig.commands[-1])) and any(x != 0.0 for x in rig.commands[-1])
    check_efforts(rig, rig.commands[-1], "after the fuzz batch")
