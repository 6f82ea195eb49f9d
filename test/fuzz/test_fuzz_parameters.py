"""Property-based fuzzing of the parameter services of every node, in process: generated set requests (one
parameter or several at once, atomically or not) naming any declared parameter of the node - or one it does not
have - with values of any parameter type, including none (a deletion), go through the same rclpy entry points the
``set_parameters`` / ``set_parameters_atomically`` services call.

Properties, for every request:
  * no exception escapes except rclpy's own refusal of an undeclared name;
  * a change is accepted only for a live parameter of the node (marker sizes) with a value its validator accepts,
    and every refusal is one line naming the parameter or the rule;
  * afterwards every parameter that is not live has its start value, both in the node's own settings (``p``) and
    in the declared parameters the services read.
The second-process attack over DDS is test/nodes/test_parameter_attack.py.
"""

from __future__ import annotations

import os

import pytest
import rclpy
from hypothesis import given, settings
from hypothesis import strategies as st
from rclpy.exceptions import ParameterNotDeclaredException
from rclpy.parameter import Parameter

from test.fuzz.scale import examples
from test.nodes.node_harness import TEST_BRAKES
from test.ros_helpers import REPO_ROOT, declared_parameters


def _nodes(context):
    from vtm_dynamics.nodes.estop_predictor import EstopPredictor
    from vtm_dynamics.nodes.projection_controller import ProjectionController
    from vtm_dynamics.nodes.robot_sim import RobotSim
    from vtm_dynamics.nodes.solvability_reporter import SolvabilityReporter

    return {
        "estop_predictor": EstopPredictor(context=context, parameter_overrides=[
            Parameter("robot", value="ur5"), Parameter("brake_config", value=TEST_BRAKES),
            Parameter("ghost_rate", value=0.0), Parameter("diagnostics_rate", value=0.0)]),
        "projection_controller": ProjectionController(context=context, parameter_overrides=[
            Parameter("urdf_path", value=os.path.join(REPO_ROOT, "urdf", "planar_3r.urdf"))]),
        "solvability_reporter": SolvabilityReporter(context=context, parameter_overrides=[
            Parameter("robot_description_topic", value=""), Parameter("joint_states_topic", value="")]),
        "robot_sim": RobotSim(context=context, parameter_overrides=[
            Parameter("brake_config", value=TEST_BRAKES), Parameter("wait_for_subscribers", value=100),
            Parameter("startup_timeout", value=3600.0), Parameter("publish_robot_description", value=False)]),
    }


@pytest.fixture(scope="module")
def nodes():
    context = rclpy.Context()
    rclpy.init(context=context)
    made = {}
    try:
        made = _nodes(context)  # not spun: the calls below are what the parameter services run
        start = {name: (dict(n.p), declared_parameters(n)) for name, n in made.items()}
        yield made, start
    finally:
        for n in made.values():
            n.destroy_node()
        rclpy.try_shutdown(context=context)


VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2 ** 63, max_value=2 ** 63 - 1),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.lists(st.floats(allow_nan=True), max_size=4), st.lists(st.text(max_size=8), max_size=4),
    st.lists(st.integers(min_value=-2 ** 31, max_value=2 ** 31), max_size=4), st.lists(st.booleans(), max_size=3),
    st.sampled_from(["/etc/hostname", "", "0", "true"]),
)


def _parameter(name: str, value) -> Parameter | None:
    try:
        return Parameter(name, value=value)
    except (TypeError, ValueError):  # a value no parameter type holds (e.g. a mixed list): not sendable
        return None


@st.composite
def requests(draw, names: list[str]):
    count = draw(st.integers(min_value=1, max_value=4))
    params = []
    for _ in range(count):
        name = draw(st.one_of(st.sampled_from(names), st.sampled_from(["not_declared", "use_sim_time", ""])))
        p = _parameter(name, draw(VALUES))
        if p is not None:
            params.append(p)
    return params, draw(st.booleans())


@pytest.mark.parametrize("which", ["estop_predictor", "projection_controller", "solvability_reporter", "robot_sim"])
def test_only_live_parameters_change_and_only_within_their_range(nodes, which):
    made, start = nodes
    node = made[which]
    names = sorted(declared_parameters(node))
    live = node.parameter_policy.live

    @settings(max_examples=examples(150))
    @given(requests(names))
    def check(request):
        params, atomic = request
        if not params:
            return
        try:
            results = [node.set_parameters_atomically(params)] if atomic else node.set_parameters(params)
        except ParameterNotDeclaredException:
            assert any(not node.has_parameter(p.name) for p in params)
            return
        for p, r in zip(params if not atomic else params[:1], results):
            if r.successful:
                changed = params if atomic else [p]
                # accepted: a live parameter, or the deletion of a name that does not exist (a no-op)
                assert all(q.name in live or (q.type_ == Parameter.Type.NOT_SET and not node.has_parameter(q.name))
                           for q in changed), [q.name for q in changed]
            else:
                assert r.reason and "\n" not in r.reason
        p_before, declared_before = start[which]
        assert {k: v for k, v in node.p.items() if k not in live} == \
               {k: v for k, v in p_before.items() if k not in live}
        declared = declared_parameters(node)
        assert {k: v for k, v in declared.items() if k not in live} == \
               {k: v for k, v in declared_before.items() if k not in live}

    check()
