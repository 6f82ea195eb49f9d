"""ISO/TS 15066 protective separation distance from predicted stops: every term, the closest point's stopping
travel towards the person recomputed independently (Pinocchio's placements of the material point along the
predicted stop), the point's approach speed by finite differences, inputs by joint name, and a table over a
workspace map's rows with each row's own case. A stop case past a joint limit (no end stops in the model) gives no
valid value, like a case that does not come to rest."""

import numpy as np
import pinocchio as pin
import pytest

import stopsafe_scenarios as S
from vtm_dynamics.core.estop import CategoryOne, StopInputError, predict_stop
from vtm_dynamics.core.estop.payload import with_payload
from vtm_dynamics.core.stopping.workspace_map import MapSpec, evaluate_chunk
from test.core.limit_case import elbow_towards_limit, reference_elbow_rest
from vtm_dynamics.core.stopsafe.separation import SeparationMonitor, SeparationParameters, separation_table
from vtm_dynamics.core.stopsafe.stop_cases import StopCase

Q = [0.3, -1.2, 1.5, -0.8, 0.5, 0.2]
V = [1.0, -1.2, 1.4, 0.8, -1.0, 1.5]


@pytest.fixture(scope="module")
def monitor():
    robot, geometry, setup = S.ur5(envelope=True, step=0.01)
    params = SeparationParameters(human_speed=1.6, reaction_time=0.12, intrusion=0.05, human_uncertainty=0.03,
                                  robot_uncertainty=0.01)
    return SeparationMonitor(setup, geometry, params)


def _point(robot, q, joint, local):
    data = robot.model.createData()
    pin.forwardKinematics(robot.model, data, q)
    return data.oMi[joint].act(local)


def test_every_term_and_the_closest_points_stopping_travel(monitor):
    robot = monitor.setup.robot
    person = np.array([0.3, 0.6, 0.2])  # the wrist approaches it: v_r and S_s are not zero
    r = monitor(list(robot.joint_names), Q, V, person)
    assert r.v_r > 0.1 and r.S_s > 0.01
    assert r.S_h == pytest.approx(1.6 * (0.12 + r.T_s))
    assert r.S_r == pytest.approx(r.v_r * 0.12)
    assert r.S_p == pytest.approx(r.S_h + r.S_r + r.S_s + 0.05 + 0.03 + 0.01)
    assert r.margin == pytest.approx(r.separation - r.S_p)
    assert r.separation == pytest.approx(np.linalg.norm(person - r.closest_point))
    # independent: the worst corner's stop by the engine, the material point carried by its joint's placement
    case = monitor.setup.worst_corner[0]
    model = with_payload(robot, case.payload, "tool0")
    brakes = monitor.setup.brakes.scaled(case.torque_factor, case.delay_factor)
    stop = predict_stop(model, brakes, np.array(Q), np.array(V), category=0, category_one=CategoryOne(),
                        settings=monitor.setup.settings)
    part = next(p for p in monitor.geometry.parts if p.link == r.link)
    data = robot.model.createData()
    pin.forwardKinematics(robot.model, data, np.array(Q))
    local = data.oMi[part.joint].actInv(r.closest_point)
    travel = max(float((_point(robot, q, part.joint, local) - r.closest_point) @ r.direction) for q in stop.q)
    assert r.S_s == pytest.approx(max(travel, 0.0), abs=1e-9)
    assert r.T_s == pytest.approx(stop.stop_time)
    # the approach speed by central differences of the point along the velocity
    h = 1e-6
    ahead = _point(robot, np.array(Q) + h * np.array(V), part.joint, local)
    behind = _point(robot, np.array(Q) - h * np.array(V), part.joint, local)
    assert r.v_r == pytest.approx(max(0.0, float((ahead - behind) @ r.direction / (2 * h))), abs=1e-6)


def test_inputs_are_by_joint_name(monitor):
    robot = monitor.setup.robot
    names = list(robot.joint_names)
    a = monitor(names, Q, V, [0.9, 0.6, 0.4])
    b = monitor(names[::-1], Q[::-1], V[::-1], [0.9, 0.6, 0.4])
    assert a.S_p == pytest.approx(b.S_p, abs=1e-12)
    with pytest.raises(StopInputError, match="unknown joint 'gripper'"):
        monitor(names + ["gripper"], Q + [0.0], V + [0.0], [0.9, 0.6, 0.4])
    with pytest.raises(StopInputError, match="person: expected 3 finite coordinates"):
        monitor(names, Q, V, [0.9, float("nan"), 0.4])


def test_table_over_a_workspace_map_uses_each_rows_case(monitor):
    robot = monitor.setup.robot
    spec = MapSpec(n_states=2, tcp_frame="tool0", payload_frame="tool0", chunk_size=2, seed=3, payloads=(0.0, 5.0),
                   speed_fraction=(0.2, 0.4))
    columns = evaluate_chunk(robot, monitor.setup.brakes, spec, 0)
    rows = separation_table(monitor, columns, [0.9, 0.6, 0.4])
    assert [r.state for r in rows] == [0, 1]
    for k, row in enumerate(rows):
        assert row.result.T_s == pytest.approx(columns["stop_time_s"][k], rel=1e-6)  # the map's own stop
    with pytest.raises(StopInputError, match="column 'q_elbow_joint' is missing"):
        separation_table(monitor, {k: v for k, v in columns.items() if k != "q_elbow_joint"}, [1, 0, 0])


def test_the_part_with_the_smallest_margin_limits_not_only_the_closest_part(monitor):
    """ISO/TS 15066, 5.5.4, formula (1) holds for every part of the robot: a part a little farther from the person
    but moving fast towards it can need more room than the closest part."""
    import coal

    robot = monitor.setup.robot
    person = np.array([0.8417, -0.3844, 0.0875])
    q = np.array([-2.144, -1.3261, -1.7939, -1.3562, 0.4667, -0.376])
    v = np.array([-1.5816, 1.551, -2.331, -2.9537, -1.7639, 0.0168])
    r = monitor.evaluate(q, v, person)
    # independent: each part's nearest point by coal, its speed by central differences, its travel by Pinocchio
    case = monitor.setup.worst_corner[0]
    stop = predict_stop(with_payload(robot, case.payload, "tool0"),
                        monitor.setup.brakes.scaled(case.torque_factor, case.delay_factor), q, v, category=0,
                        category_one=CategoryOne(), settings=monitor.setup.settings)
    data = robot.model.createData()
    pin.forwardKinematics(robot.model, data, q)
    margins = {}
    for part in monitor.geometry.parts:
        M = data.oMi[part.joint] * pin.SE3(part.rotation, part.translation)
        res = coal.DistanceResult()
        d = coal.distance(part.shape, coal.Transform3s(M.rotation, M.translation), coal.Sphere(1e-9),
                          coal.Transform3s(np.eye(3), person), coal.DistanceRequest(), res)
        x = np.array(res.getNearestPoint1())
        n = (person - x) / np.linalg.norm(person - x)
        local = data.oMi[part.joint].actInv(x)
        h = 1e-6
        v_r = max(0.0, float((_point(robot, q + h * v, part.joint, local)
                              - _point(robot, q - h * v, part.joint, local)) @ n / (2 * h)))
        S_s = max(0.0, max(float((_point(robot, qk, part.joint, local) - x) @ n) for qk in stop.q))
        S_p = 1.6 * (0.12 + stop.stop_time) + v_r * 0.12 + S_s + 0.05 + 0.03 + 0.01
        margins[part.link] = min(margins.get(part.link, np.inf), d - S_p)
    limiting = min(margins, key=margins.get)
    assert r.link == limiting and r.margin == pytest.approx(margins[limiting], abs=1e-5)
    assert r.closest_link != r.link and r.closest_separation < r.separation  # the closest part does not limit
    assert r.safe == (margins[limiting] >= 0)


def test_a_stop_case_past_a_joint_limit_gives_no_valid_value_and_is_not_safe_however_far_the_person(monitor):
    """The UR5 elbow 10 mrad below its upper limit at 3 rad/s, the nominal brakes: the stop rests 0.107 rad past
    the limit (independent integration). The person 3 m away: the margin is positive, and was reported safe."""
    robot = monitor.setup.robot
    q, v, limit = elbow_towards_limit(robot)
    assert reference_elbow_rest(robot, q, v) > limit + 0.1
    person = np.array([3.0, 0.0, 0.5])
    r = monitor.evaluate(q, v, person, cases=[StopCase(0, 1.0, 1.0, 0.0)])
    assert r.margin > 1.0 and r.stopped  # at rest, far from the person: only the limit makes it no value
    assert not r.safe and not r.valid
    (line,) = r.limit_crossings
    assert line.startswith("elbow_joint reaches") and line.endswith(f"past its upper limit {limit:.4f} rad")
    assert r.invalid_reason().startswith("case (cat 0, torque x1, delay x1, payload 0 kg): past a joint limit: "
                                         "elbow_joint reaches")
    within = monitor.evaluate(np.array(Q), np.array(V), person, cases=[StopCase(0, 1.0, 1.0, 0.0)])
    assert within.valid and within.safe and within.limit_crossings == () and within.invalid_reason() == ""

