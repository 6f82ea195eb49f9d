"""Brake model: configuration, gear conversion and one-line errors naming the field."""

import math
import os

import numpy as np
import pytest
import yaml

from core_testdata import REPO
from vtm_dynamics.core.estop.brakes import BrakeConfigError, BrakeSet, brakes_from_config

UR5_BRAKES = os.path.join(REPO, "config", "ur5_brakes.yaml")
PLANAR_BRAKES = os.path.join(REPO, "config", "planar_3r_brakes.yaml")


def cfg(**joints):
    return {"brakes": {"joints": joints}}


def test_joint_side_values_are_taken_as_given_and_indexed_by_velocity(planar_3r):
    b = brakes_from_config(planar_3r, cfg(joint2={"sliding_torque": 10.0, "holding_torque": 12.0, "viscous": 0.5,
                                                 "engage_delay": 0.02}))
    i = planar_3r.joint("joint2").idx_v
    assert b.braked.tolist() == [False, True, False]
    assert (b.sliding_torque[i], b.holding_torque[i], b.viscous[i], b.engage_delay[i]) == (10.0, 12.0, 0.5, 0.02)
    assert b.sliding_torque[0] == 0.0 and b.holding_torque[0] == 0.0
    assert math.isinf(b.pawl_delay[i])


def test_motor_side_brake_behind_a_gear_scales_torques_by_the_ratio_and_viscous_by_its_square(planar_3r):
    b = brakes_from_config(planar_3r, cfg(joint1={"sliding_torque": 2.0, "holding_torque": 3.0, "viscous": 0.01,
                                                 "gear_ratio": 50, "side": "motor"}))
    assert b.sliding_torque[0] == pytest.approx(100.0)
    assert b.holding_torque[0] == pytest.approx(150.0)
    assert b.viscous[0] == pytest.approx(25.0)
    # a joint-side brake ignores the ratio for its values (it is only reported)
    b2 = brakes_from_config(planar_3r, cfg(joint1={"sliding_torque": 2.0, "gear_ratio": 50}))
    assert b2.sliding_torque[0] == 2.0


def test_defaults_apply_to_every_listed_joint_and_entries_override_them(planar_3r):
    b = brakes_from_config(planar_3r, {"brakes": {"defaults": {"engage_delay": 0.05, "sliding_torque": 7.0},
                                                  "joints": {"joint1": {}, "joint3": {"engage_delay": 0.01}}}})
    assert b.engage_delay.tolist() == [0.05, 0.0, 0.01]
    assert b.sliding_torque.tolist() == [7.0, 0.0, 7.0]
    # holding defaults to the sliding torque when not given
    assert b.holding_torque.tolist() == [7.0, 0.0, 7.0]


def test_shipped_configs_load_for_their_robots(ur5, planar_3r):
    b = brakes_from_config(ur5, UR5_BRAKES)
    assert b.braked.all() and np.all(b.holding_torque >= b.sliding_torque)
    p = brakes_from_config(planar_3r, PLANAR_BRAKES)
    assert p.sliding_torque[0] == pytest.approx(6000.0)  # 60 N m motor side x ratio 100


def test_round_trip_through_as_config(ur5):
    b = brakes_from_config(ur5, UR5_BRAKES)
    b2 = brakes_from_config(ur5, b.as_config())
    for name in ("engage_delay", "sliding_torque", "holding_torque", "viscous"):
        np.testing.assert_array_equal(getattr(b, name), getattr(b2, name))


def test_scaled_copy_for_envelopes(ur5):
    b = brakes_from_config(ur5, UR5_BRAKES)
    s = b.scaled(torque_factor=0.9, delay_factor=1.5, delay_offset=0.002)
    np.testing.assert_allclose(s.sliding_torque, 0.9 * b.sliding_torque)
    np.testing.assert_allclose(s.engage_delay, 1.5 * b.engage_delay + 0.002)
    assert isinstance(s, BrakeSet)


@pytest.mark.parametrize(
    "config, field",
    [
        (cfg(no_such_joint={"sliding_torque": 1.0}), "brakes.joints.no_such_joint"),
        (cfg(joint1={"sliding_torque": -3.0}), "brakes.joints.joint1.sliding_torque"),
        (cfg(joint1={"holding_torque": -1.0}), "brakes.joints.joint1.holding_torque"),
        (cfg(joint2={"viscous": float("nan")}), "brakes.joints.joint2.viscous"),
        (cfg(joint2={"engage_delay": float("inf")}), "brakes.joints.joint2.engage_delay"),
        (cfg(joint2={"sliding_torque": "strong"}), "brakes.joints.joint2.sliding_torque"),
        (cfg(joint2={"slidng_torque": 1.0}), "brakes.joints.joint2.slidng_torque"),
        (cfg(joint3={"side": "wrist"}), "brakes.joints.joint3.side"),
        (cfg(joint3={"gear_ratio": 0}), "brakes.joints.joint3.gear_ratio"),
        ({"brakes": {"joints": {}}}, "brakes.joints"),
        ({"brake": {}}, "brakes"),
        ({"brakes": {"defaults": {"delay": 1}, "joints": {"joint1": {}}}}, "brakes.defaults.delay"),
    ],
)
def test_bad_configuration_gives_one_line_naming_the_field(planar_3r, config, field):
    with pytest.raises(BrakeConfigError) as err:
        brakes_from_config(planar_3r, config)
    msg = str(err.value)
    assert isinstance(err.value, ValueError)
    assert msg.startswith(field + ":") and "\n" not in msg


def test_yaml_file_errors_are_one_line(planar_3r, tmp_path):
    with pytest.raises(BrakeConfigError, match=r"^brakes: file not found"):
        brakes_from_config(planar_3r, str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("brakes: [unclosed\n")
    with pytest.raises(BrakeConfigError, match=r"^brakes: cannot parse bad.yaml"):
        brakes_from_config(planar_3r, str(bad))
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(cfg(joint1={"sliding_torque": 5.0})))
    assert brakes_from_config(planar_3r, str(good)).sliding_torque[0] == 5.0


# ------------------------------------------------------------------ one consistency rule: holding >= breakaway >= sliding
@pytest.mark.parametrize("entry, field", [
    ({"sliding_torque": 50.0, "holding_torque": 40.0}, "holding_torque"),  # no breakaway: holding < sliding
    ({"sliding_torque": 50.0, "holding_torque": 0.0}, "holding_torque"),
    ({"sliding_torque": 50.0, "breakaway_torque": 60.0, "stribeck_velocity": 0.1, "holding_torque": 55.0},
     "holding_torque"),
    ({"sliding_torque": 50.0, "breakaway_torque": 45.0, "stribeck_velocity": 0.1, "holding_torque": 70.0},
     "breakaway_torque"),
    ({"sliding_torque": 2.0, "holding_torque": 1.5, "gear_ratio": 50, "side": "motor"}, "holding_torque"),
])
def test_a_brake_that_cannot_hold_its_own_friction_is_refused_in_one_line_naming_the_joint(planar_3r, entry, field):
    """holding >= breakaway >= sliding >= 0, or the file is refused where it is read: such a brake made the
    stick/slip decision fail with a traceback at the first stop instead of at start-up."""
    with pytest.raises(BrakeConfigError) as err:
        brakes_from_config(planar_3r, cfg(joint2=entry))
    message = str(err.value)
    assert message.startswith(f"brakes.joints.joint2.{field}:") and "\n" not in message, message
    assert "holding >= breakaway >= sliding" in message


def test_the_rule_holds_for_defaults_too_and_equal_values_are_accepted(planar_3r):
    with pytest.raises(BrakeConfigError, match=r"brakes.joints.joint3.holding_torque"):
        brakes_from_config(planar_3r, {"brakes": {"defaults": {"holding_torque": 30.0},
                                                  "joints": {"joint1": {"sliding_torque": 20.0},
                                                             "joint3": {"sliding_torque": 31.0}}}})
    b = brakes_from_config(planar_3r, cfg(joint1={"sliding_torque": 20.0, "holding_torque": 20.0}))
    assert b.holding_torque[0] == b.sliding_torque[0] == 20.0
