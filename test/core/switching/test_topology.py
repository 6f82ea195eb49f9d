"""Specification of the active constraint set (Müller 2026, eqs. (2), (23), (38))."""

import numpy as np
import pytest

from vtm_dynamics.core.robot.constraints import ConstraintError, JointLock
from vtm_dynamics.core.switching.topology import Topology


def test_activation_stacks_persistent_rows_first_and_binds_lock_angles(planar_3r):
    q = np.array([0.1, 0.2, 0.3])
    t1 = Topology().activate(planar_3r, q, [JointLock("joint2")])
    t2 = t1.activate(planar_3r, q + 0.5, [JointLock("joint3")])
    assert np.array_equal(t2.jacobian(planar_3r, q), [[0, 1, 0], [0, 0, 1]])  # eq. (39): J_+ = (J_1; J_2)
    assert t2.constraints[0].lock_q == (0.2,) and t2.constraints[1].lock_q == (0.8,)
    assert t2.locked_joints == ("joint2", "joint3") and list(t2.free_v_indices(planar_3r)) == [0]
    assert t1.locked_joints == ("joint2",)  # events create new topologies; the old one is unchanged
    assert np.allclose(t2.residual(planar_3r, [0.0, 0.2, 0.8]), 0.0)
    assert t2.drift(planar_3r, q, np.ones(3)).shape == (2,) and t2.is_joint_locks_only


def test_release_and_name_checks(planar_3r):
    t = Topology().activate(planar_3r, np.zeros(3), [JointLock("joint1"), JointLock("joint3")])
    assert t.release(["lock(joint1)"]).locked_joints == ("joint3",)
    with pytest.raises(ConstraintError, match="not active"):
        t.release(["lock(joint2)"])
    with pytest.raises(ConstraintError, match="duplicate"):
        Topology((JointLock("joint1"), JointLock("joint1")))
    assert Topology().jacobian(planar_3r, np.zeros(3)).shape == (0, 3)
