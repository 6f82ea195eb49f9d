"""Benchmark: projected inverse-dynamics controller update vs a plain Lagrange-multiplier (KKT) computation of the
same torques, measured in the same run (Aghili, eqs. (45)-(46) vs Appendix B).

Cases: a 7-DOF Panda arm (fingers locked, end-effector point held: 2 + 3 rows), a 6-DOF UR5 (end-effector point
held, 3 rows) and the slider-crank (prismatic loop closure, 5 rows of rank 2). For every case both methods get
the same M, h, A, A'q' (their computation is timed separately as "model terms") and must return the same torque;
the KKT peer needs independent rows, so it is given only the independent rows (it fails on the redundant set).

Task-coordinate law (eqs. (40)-(46) in independent coordinates theta, ``update_task``) against the joint-space
law (``update``) and the KKT computation, all as a full control cycle from the measured state (model terms
included, plus theta(q), its Jacobian and bias for the task law), same run.

Simulation defaults: cost per ``constrained_step`` of the slider-crank at dt = 2 ms with the accurate defaults
(1 ms RK4 sub-steps, Newton correction always run) against the earlier setting (one RK4 step, Newton only above
1e-12), and the angle drift of each against an independent reference over 10 s (18 singular passages).

Run:  python bench/bench_projection.py   (prints figures; no assertion on speed)
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from vtm_dynamics.core.projection.simulation import ConstraintSet  # noqa: E402
from vtm_dynamics.core.robot.constraints import JointLock, LoopClosure, constraints_from_extension  # noqa: E402
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf  # noqa: E402
from vtm_dynamics.core.projection.control import (  # noqa: E402
    ProjectedInverseDynamicsController,
    projected_inverse_dynamics,
)
from vtm_dynamics.core.projection.simulation import constrained_step  # noqa: E402
from vtm_dynamics.core.projection.task_coordinates import SelectedJoints  # noqa: E402
from vtm_dynamics.core.projection.projector import null_space_projector  # noqa: E402
from vtm_dynamics.core.robot.urdf_extension import LoopClosureSpec, Pose  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kkt_torque(M, h, A, drift, a_d):
    """Same torque by Lagrange multipliers: q'' = argmin ||q'' - a_d|| s.t. A q'' = -A'q' (KKT), then the
    least-norm torque tau = M q'' + h + A^T lambda with (A A^T) lambda = -A (M q'' + h). Needs full row rank."""
    n, m = M.shape[0], A.shape[0]
    K = np.block([[np.eye(n), A.T], [A, np.zeros((m, m))]])
    qdd = np.linalg.solve(K, np.concatenate([a_d, -drift]))[:n]
    base = M @ qdd + h
    lam = np.linalg.solve(A @ A.T, -A @ base)
    return base + A.T @ lam


def point_hold(robot: RobotModel, link: str, q: np.ndarray) -> LoopClosure:
    """A spherical loop closure holding the origin of ``link`` where it is at q."""
    p = robot.frame_placement(q, link).translation
    spec = LoopClosureSpec("hold", "spherical", "world", link, Pose(xyz=tuple(float(x) for x in p)), Pose(), (1.0, 0.0, 0.0))
    return LoopClosure(spec)


def timeit(fn, repeats):
    fn()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - t0) / repeats


def bench_case(name, robot, constraints, q, independent_rows, repeats=2000):
    rng = np.random.default_rng(0)
    n = robot.nv
    A_full = constraints.jacobian(robot, q)
    v = null_space_projector(A_full).P @ rng.normal(size=n)
    e, ed, add = 0.01 * rng.normal(size=n), 0.01 * rng.normal(size=n), rng.normal(size=n)
    kp, kd = 100.0, 20.0

    def terms():
        return robot.mass_matrix(q), robot.bias_forces(q, v), constraints.jacobian(robot, q), constraints.drift(robot, q, v)

    M, h, A, drift = terms()
    a_d = add + kd * ed + kp * e
    rows = np.asarray(independent_rows)
    tau_proj = projected_inverse_dynamics(M, h, A, drift, e, ed, add, kp, kd).tau
    tau_kkt = kkt_torque(M, h, A[rows], drift[rows], a_d)
    agree = float(np.max(np.abs(tau_proj - tau_kkt)))
    t_terms = timeit(terms, repeats // 4)
    t_proj = timeit(lambda: projected_inverse_dynamics(M, h, A, drift, e, ed, add, kp, kd), repeats)
    t_kkt = timeit(lambda: kkt_torque(M, h, A[rows], drift[rows], a_d), repeats)
    try:
        kkt_torque(M, h, A, drift, a_d)
        redundant_kkt = "solved"
    except np.linalg.LinAlgError:
        redundant_kkt = "singular (fails)"
    print(
        f"{name:<34} n={n} m={A.shape[0]} rank={np.linalg.matrix_rank(A)} | model terms {t_terms * 1e6:8.1f} us | "
        f"projected law {t_proj * 1e6:7.1f} us | KKT {t_kkt * 1e6:7.1f} us | ratio proj/KKT {t_proj / t_kkt:5.2f} | "
        f"full cycle ratio {(t_terms + t_proj) / (t_terms + t_kkt):5.2f} | max |tau diff| {agree:.1e} | "
        f"KKT on all rows: {redundant_kkt}"
    )


def bench_task_case(name, robot, constraints, q, task_joints, independent_rows, repeats=1000):
    """Full control cycle from the measured state: task-coordinate law vs joint-space law vs KKT."""
    rng = np.random.default_rng(1)
    n = robot.nv
    v = null_space_projector(constraints.jacobian(robot, q)).P @ rng.normal(size=n)
    task = SelectedJoints(robot, task_joints)
    ctl = ProjectedInverseDynamicsController(robot, constraints, kp=100.0, kd=20.0, task=task)
    k = len(task_joints)
    th = task.value(robot, q) + 0.01
    q_d, v_d, a_d = robot.integrate(q, 0.01 * rng.normal(size=n)), v.copy(), rng.normal(size=n)
    rows = np.asarray(independent_rows)

    def kkt_cycle():
        M, h = robot.mass_matrix(q), robot.bias_forces(q, v)
        A, drift = constraints.jacobian(robot, q), constraints.drift(robot, q, v)
        a = a_d + 20.0 * (v_d - v) + 100.0 * robot.difference(q, q_d)
        return kkt_torque(M, h, A[rows], drift[rows], a)

    t_task = timeit(lambda: ctl.update_task(q, v, th, np.zeros(k), np.zeros(k)), repeats)
    t_joint = timeit(lambda: ctl.update(q, v, q_d, v_d, a_d), repeats)
    t_kkt = timeit(kkt_cycle, repeats)
    print(f"{name:<34} n={n} k={k} | task law {t_task * 1e6:7.1f} us | joint-space law {t_joint * 1e6:7.1f} us | "
          f"KKT {t_kkt * 1e6:7.1f} us | task/joint {t_task / t_joint:5.2f} | task/KKT {t_task / t_kkt:5.2f}")


def slider_crank_reference(times):
    """One-coordinate Lagrangian of the branch q2 = -2 q1 (see test_slider_crank_accuracy.py), DOP853."""
    from scipy.integrate import solve_ivp

    def rhs(t, y):
        s_, c_ = np.sin(y[0]), np.cos(y[0])
        return [y[1], -(4 * s_ * c_ * y[1] ** 2 + 9.81 / 0.5 * c_) / (1 + 4 * s_ * s_)]

    return solve_ivp(rhs, (times[0], times[-1]), [0.0, 10.0], method="DOP853", t_eval=times, rtol=1e-13,
                     atol=1e-13).y[0]


def bench_simulation_defaults(seconds=10.0, dt=2e-3):
    sc = RobotModel.from_urdf_file(os.path.join(REPO, "urdf", "slider_crank.urdf"))
    cs = ConstraintSet(constraints_from_extension(sc))
    steps = int(round(seconds / dt))
    ref = slider_crank_reference(dt * np.arange(steps + 1))
    results = {}
    for label, kw in (("accurate defaults", {}), ("earlier setting", dict(max_step=None, position_tol=1e-12))):
        q, v = np.zeros(3), np.array([1.0, -2.0, 1.0]) * 10.0
        worst, t0 = 0.0, time.perf_counter()
        for k in range(1, steps + 1):
            st = constrained_step(sc, cs, q, v, None, dt, **kw)
            q, v = st.q, st.v
            worst = max(worst, abs(q[0] - ref[k]))
            if k % 1000 == 0:
                print(f"  {label}: {k}/{steps} steps", flush=True)
        per_step = (time.perf_counter() - t0) / steps
        results[label] = per_step
        print(f"slider-crank {seconds:.0f} s at dt {dt * 1e3:.0f} ms, {label:<18} | {per_step * 1e3:6.2f} ms/step | "
              f"angle drift vs reference {worst:.1e} rad")
    print(f"cost of the accurate defaults: {results['accurate defaults'] / results['earlier setting']:.2f} x")


def main() -> None:
    panda = RobotModel.from_urdf_file(example_robot_urdf("panda_description/urdf/panda.urdf"))
    qp = panda.neutral()
    qp[:7] = [0.1, -0.4, 0.2, -2.0, 0.1, 1.6, 0.7]
    qp[7:] = 0.02
    fingers = [j for j in panda.joint_names if "finger" in j]
    cs_p = ConstraintSet((JointLock(fingers).bind(panda, qp), point_hold(panda, "panda_link7", qp)))
    bench_case("panda 7+2 DOF, fingers locked + EE point", panda, cs_p, qp, np.arange(5))

    ur5 = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    qu = ur5.neutral() + np.array([0.2, -1.0, 1.2, -0.5, 0.4, 0.1])
    cs_u = ConstraintSet((point_hold(ur5, "wrist_3_link", qu),))
    bench_case("ur5 6 DOF, EE point held", ur5, cs_u, qu, np.arange(3))
    cs_u2 = cs_u.with_constraint(JointLock("elbow_joint").bind(ur5, qu))
    bench_case("ur5 6 DOF, EE point + elbow lock", ur5, cs_u2, qu, np.arange(4))

    sc = RobotModel.from_urdf_file(os.path.join(REPO, "urdf", "slider_crank.urdf"))
    cs_sc = ConstraintSet(constraints_from_extension(sc))
    qs = np.array([1.0, -2.0, 1.0]) * 0.7
    A = cs_sc.jacobian(sc, qs)
    independent = [i for i in range(A.shape[0]) if np.linalg.norm(A[i]) > 1e-12]
    bench_case("slider-crank 3 DOF, prismatic closure", sc, cs_sc, qs, independent)

    print("\nfull control cycle from the measured state (model terms included):")
    bench_task_case("panda, fingers locked + EE point", panda, cs_p, qp,
                    ["panda_joint1", "panda_joint5", "panda_joint6", "panda_joint7"], np.arange(5))
    bench_task_case("ur5, EE point held", ur5, cs_u, qu, ["wrist_1_joint", "wrist_2_joint", "wrist_3_joint"],
                    np.arange(3))
    bench_task_case("slider-crank, theta = crank angle", sc, cs_sc, qs, ["crank_joint"], independent)

    print("\nsimulation defaults (constrained_step):")
    bench_simulation_defaults()


if __name__ == "__main__":
    main()
