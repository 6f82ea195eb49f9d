"""Huang's second-order Taylor reaction formulation, measured against an independent Pinocchio reference.

Reference: ``bench/reaction_reference.py`` (Pinocchio aba / constraintDynamics, RNEA reactions, DOP853 at 1e-11).
Expected values come from that reference or are written out independently from the paper's equations here;
orders of accuracy are fitted from errors at two steps. docs/reactions.md reports the same measurements.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from reaction_reference import body_positions, simulate_reference
from test.core.reactions import huang_planar_reference as faithful
from vtm_dynamics.core.reactions.absolute_coordinates import assemble_loops, constraint_matrix, load_absolute_model
from vtm_dynamics.core.reactions.kkt_reactions import simulate_kkt, without_drives
from vtm_dynamics.core.reactions.taylor_reactions import (
    TaylorError,
    assemble_system,
    constraint_gaps,
    prepare_mechanism,
    simulate_taylor,
    state_from_joints,
    taylor_step,
)
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file

URDF = Path(__file__).resolve().parents[3] / "urdf"
PENDULUM = read_urdf_file(str(URDF / "huang_double_pendulum.urdf"))
STEWART = read_urdf_file(str(URDF / "huang_stewart_platform.urdf"))
PARALLELOGRAM = read_urdf_file(str(URDF / "parallelogram_4bar.urdf"))
G_PLANE = (0.0, -9.81, 0.0)
MOTORS = {"J7": 10.0, "J8": 10.0, "J9": 10.0}
M, J, D = 14.59, 1.36, 0.61  # Fig. 8


def _pendulum_q(theta1: float, theta2_rel: float) -> np.ndarray:
    return np.array([np.cos(theta1), np.sin(theta1), np.cos(theta2_rel), np.sin(theta2_rel)])


def _order(e_coarse: float, e_fine: float) -> float:
    return float(np.log2(e_coarse / e_fine))


@pytest.fixture(scope="module")
def pendulum_runs():
    model = load_absolute_model(PENDULUM, planar=True)
    q0, v0 = _pendulum_q(0.0, 0.0), np.zeros(2)
    mech = prepare_mechanism(model, q0, G_PLANE)
    T = 0.5
    runs = {(dt, c): simulate_taylor(mech, q0, v0, dt, T, correction=c, every=int(round(0.1 / dt)))
            for dt in (4e-3, 2e-3) for c in ("none", "project", "heun")}
    times = runs[(4e-3, "none")].times
    ref = simulate_reference(PENDULUM, q0, v0, T, times, gravity=G_PLANE)
    return model, runs, ref, body_positions(PENDULUM, ref.q, model.bodies)


def test_double_pendulum_follows_the_reference_at_first_order(pendulum_runs):
    """Motion and reactions converge to Pinocchio's, but at first order in Δt, not the second order claimed."""
    model, runs, ref, x_ref = pendulum_runs
    for corr in ("none", "project"):
        ex, er = [], []
        for dt in (4e-3, 2e-3):
            run = runs[(dt, corr)]
            ex.append(np.abs(run.x - x_ref).max())
            err = 0.0
            for name in ("joint1", "joint2"):
                a, b = run.columns[name]
                ref_xy = ref.reactions[name][:, :2]  # joint frame = pair frame; planar rows Fx, Fy
                err = max(err, float(np.abs(run.reactions[:, a:b] - ref_xy).max()))
            er.append(err)
        assert ex[1] < 0.02 and er[1] < 10.0  # [m], [N] out of ~550 N: the method tracks the reference
        assert 0.8 < _order(*ex) < 1.3, ex
        assert 0.8 < _order(*er) < 1.3, er


def test_heun_correction_makes_the_motion_second_order_but_not_the_reactions(pendulum_runs):
    model, runs, ref, x_ref = pendulum_runs
    ex = [np.abs(runs[(dt, "heun")].x - x_ref).max() for dt in (4e-3, 2e-3)]
    assert ex[1] < 5e-5 and 1.7 < _order(*ex) < 2.3, ex
    er = []
    for dt in (4e-3, 2e-3):
        run = runs[(dt, "heun")]
        er.append(max(float(np.abs(run.pair(n) - ref.reactions[n][:, :2]).max()) for n in ("joint1", "joint2")))
    assert 0.8 < _order(*er) < 1.3, er  # λ is the reaction held over the step: first order in every variant


def test_reactions_of_the_sampled_state_are_second_order_with_heun(pendulum_runs):
    """λ of eq. (36) is first order; the acceleration-level reactions of the Heun state are second order."""
    model, _, ref, _ = pendulum_runs
    q0, v0 = _pendulum_q(0.0, 0.0), np.zeros(2)
    mech = prepare_mechanism(model, q0, G_PLANE)
    er = []
    for dt in (4e-3, 2e-3):
        run = simulate_taylor(mech, q0, v0, dt, 0.5, correction="heun", every=int(round(0.1 / dt)), reactions_at="state")
        assert run.formulation == "taylor-heun/state"
        er.append(max(float(np.abs(run.pair(n) - ref.reactions[n][:, :2]).max()) for n in ("joint1", "joint2")))
    assert er[1] < 0.5 and 1.7 < _order(*er) < 2.3, er


def test_energy_without_input_over_several_seconds():
    """Literal scheme: energy grows without bound (here > 100 J in 4 s); Heun + projection stays within 0.5 J."""
    model = load_absolute_model(PENDULUM, planar=True)
    q0, v0 = _pendulum_q(0.0, 0.0), np.zeros(2)
    mech = prepare_mechanism(model, q0, G_PLANE)
    literal = simulate_taylor(mech, q0, v0, 4e-3, 4.0, every=50)
    heun = simulate_taylor(mech, q0, v0, 4e-3, 4.0, correction="heun", every=50)
    assert literal.diverged_at is not None or np.abs(literal.energy - literal.energy[0]).max() > 100.0
    assert np.abs(heun.energy - heun.energy[0]).max() < 0.5  # measured 0.23 J (of ~260 J exchanged)


def test_double_pendulum_constraint_gap_is_third_order_and_energy_drifts_first_order(pendulum_runs):
    _, runs, ref, _ = pendulum_runs
    gaps = [runs[(dt, "none")].gap_position.max() for dt in (4e-3, 2e-3)]
    assert 2.7 < _order(*gaps) < 3.3, gaps
    assert np.ptp(ref.energy) < 1e-6  # the reference conserves energy (no input)
    drift = [abs(runs[(dt, "none")].energy[-1] - runs[(dt, "none")].energy[0]) for dt in (4e-3, 2e-3)]
    assert drift[1] > 0.3 and 0.8 < _order(*drift) < 1.3, drift  # energy grows ~ Δt (J)


@pytest.mark.parametrize("th1, phi, det", [(0.6, 0.0, 40.9), (0.6, np.pi / 2, 104.6), (-0.4, 1.0, 86.0)])
def test_eq37_system_matrix_and_its_determinant(th1, phi, det):
    """Eqs. (37)-(39) rebuilt from eq. (14.a) at absolute angles θ1, θ2 = θ1 + φ. The determinant is
    (k² + 6k + 1 + 4k² sin²φ)(Δt²/2m)⁴ with k = m d²/J: 40.9 at θ1 = θ2 (not the paper's "9/2 Δt²"), 104.6 at 90°
    apart; it depends on the angle between the links and is never zero."""
    model = load_absolute_model(PENDULUM, planar=True)
    q = _pendulum_q(th1, phi)
    mech = prepare_mechanism(model, q, G_PLANE)
    s = state_from_joints(mech, q, np.zeros(2))
    dt = 1e-3
    G, _, _ = assemble_system(mech, s, dt)
    # eq. (14.a), planar: ∂Δr^c/∂R^k = Δt²/2 [I/m + (1/J) d_c^⊥ d_k^⊥ᵀ], d^⊥ = (−d_y, d_x) (world)
    u1 = np.array([np.cos(th1), np.sin(th1)])
    u2 = np.array([np.cos(th1 + phi), np.sin(th1 + phi)])
    perp = lambda d: np.array([-d[1], d[0]])  # noqa: E731

    def dW(dc, dk):
        return dt * dt / 2 * (np.eye(2) / M + np.outer(perp(dc), perp(dk)) / J)

    d11, d12, d22 = -D * u1, D * u1, -D * u2  # joint points from each centre of mass
    # unknowns: R1 on link 1 (joint 1), R2 on link 2 (joint 2; link 1 gets −R2), world axes
    # rows: joint 1 Δr_1^1 = 0 (eq. (21) with the ground); joint 2 Δr_2^2 − Δr_1^2 = 0 (eq. (22), child minus parent)
    Gw = np.block([[dW(d11, d11), -dW(d11, d12)],
                   [-dW(d12, d11), dW(d12, d12) + dW(d22, d22)]])
    rot = lambda a: np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])  # noqa: E731
    T = np.block([[rot(th1), np.zeros((2, 2))], [np.zeros((2, 2)), rot(th1 + phi)]])  # pair frames turn with links
    np.testing.assert_allclose(G, T.T @ Gw @ T, rtol=1e-9, atol=1e-12 * np.abs(G).max())
    N = Gw * 2 * M / dt**2
    k = M * D * D / J  # 3.99
    assert np.linalg.det(N) == pytest.approx(k * k + 6 * k + 1 + 4 * k * k * np.sin(phi) ** 2, rel=1e-9)
    assert np.linalg.det(N) == pytest.approx(det, abs=0.05)


@pytest.fixture(scope="module")
def faithful_pendulum_runs():
    """1 s from horizontal rest at Δt = 2 ms and 1 ms: this implementation and the paper's scheme written out."""
    model = load_absolute_model(PENDULUM, planar=True)
    q0 = _pendulum_q(0.0, 0.0)
    mech = prepare_mechanism(model, q0, G_PLANE)
    out = {}
    for dt in (2e-3, 1e-3):
        n = int(round(1.0 / dt))
        out[dt] = (simulate_taylor(mech, q0, np.zeros(2), dt, 1.0, every=n // 10),
                   faithful.simulate(0.0, 0.0, dt, n, n // 10))
    return out


def test_literal_scheme_is_the_papers_scheme_step_for_step(faithful_pendulum_runs):
    """Positions to rounding and reactions to 1e-3 N (of ~800 N) over 1 s. Before the ground pivot's own copy of the
    joint point entered eq. (21) the reactions drifted 0.4 N from the paper's scheme in that second."""
    for run, ref in faithful_pendulum_runs.values():
        for k, (t, Q, r, angles) in enumerate(ref):
            assert run.times[k] == pytest.approx(t)
            assert np.abs(run.x[k][:, :2] - r).max() < 1e-10
            R1, R2 = faithful.in_link_axes(Q, angles)
            assert np.abs(run.pair("joint1")[k] - R1).max() < 1e-3, (t, run.pair("joint1")[k], R1)
            assert np.abs(run.pair("joint2")[k] - R2).max() < 1e-3, (t, run.pair("joint2")[k], R2)


def test_ground_pivot_gap_is_third_order_like_the_other_joint(faithful_pendulum_runs):
    """The pivot's copy on link 1 stays within O(Δt³) of the ground's (it grew as O(Δt²): 3.2e-6 m at 1 ms)."""
    gaps = []
    for dt in (2e-3, 1e-3):
        run, _ = faithful_pendulum_runs[dt]
        pivot = run.x[:, 0, :2] - np.einsum("kij,j->ki", run.R[:, 0, :2, :2], np.array([D, 0.0]))
        gaps.append(np.linalg.norm(pivot, axis=1).max())
        assert gaps[-1] <= 1.5 * run.gap_position.max()  # the reported gap includes the pivot's
    assert gaps[1] < 2e-7 and 2.6 < _order(*gaps) < 3.4, gaps


def test_a_gap_at_the_ground_pivot_is_reported_and_closed_by_one_step():
    """A 1 mm gap at the pivot: constraint_gaps reports it (it said 0) and eq. (36) closes it in one step (it
    stayed 1 mm), as the paper's eq. (21) with the ground's fixed point does."""
    model = load_absolute_model(PENDULUM, planar=True)
    q0 = _pendulum_q(0.0, 0.0)
    mech = prepare_mechanism(model, q0, G_PLANE)
    s = state_from_joints(mech, q0, np.zeros(2))
    s.x[:, 0] += 1e-3  # both links 1 mm along x: joint 2 closed, the ground pivot open
    assert constraint_gaps(mech, s)[0] == pytest.approx(1e-3, rel=1e-9)
    new, lam, _ = taylor_step(mech, s, 1e-3)
    assert constraint_gaps(mech, new)[0] < 1e-9
    ref = faithful.simulate(0.0, 0.0, 1e-3, 0, 1, gap=(1e-3, 0.0))
    R1, R2 = faithful.in_link_axes(ref[0][1], ref[0][3])
    np.testing.assert_allclose(lam, np.concatenate([R1, R2]), rtol=1e-7)  # the pull that closes it (~2.9e4 N)


def _parallelogram(planar: bool, angle: float):
    model = without_drives(load_absolute_model(PARALLELOGRAM, planar=planar))
    q = np.array([angle, -angle, angle])
    v = np.array([1.0, -1.0, 1.0])
    mech = prepare_mechanism(model, q)
    return model, q, mech, state_from_joints(mech, q, v)


@pytest.mark.parametrize("dt", [1e-2, 1e-3])
def test_not_regular_at_the_parallelogram_change_point(dt):
    """At the change point (all pivots collinear) C loses a rank; the Taylor matrix loses it too, for any Δt."""
    model, q, mech, s = _parallelogram(True, -np.pi / 2)
    C = constraint_matrix(model, q).matrix
    sc = np.linalg.svd(C, compute_uv=False)
    assert sc[-1] < 1e-12 * sc[0]  # genuinely singular (8 rows, rank 7)
    G, _, _ = assemble_system(mech, s, dt)
    sg = np.linalg.svd(G, compute_uv=False)
    assert sg[-1] < 1e-12 * sg[0]
    # away from it both are regular and equally conditioned (the KKT limit dt = 0)
    _, _, mech2, s2 = _parallelogram(True, -np.pi / 2 + 0.3)
    g = np.linalg.svd(assemble_system(mech2, s2, dt)[0], compute_uv=False)
    g0 = np.linalg.svd(assemble_system(mech2, s2, 0.0)[0], compute_uv=False)
    assert g[-1] / g[0] > 1e-3 and abs(g[-1] / g[0] - g0[-1] / g0[0]) < 1e-3 * g0[-1] / g0[0]


def test_redundant_reactions_are_flagged_not_picked():
    """Spatial parallelogram (p = 3): the Taylor matrix is singular every step; the run says which pairs are not
    unique and the KKT run leaves their indeterminate components empty (NaN)."""
    model, q, mech, _ = _parallelogram(False, -np.pi / 2 + 0.4)
    v = np.array([1.0, -1.0, 1.0])
    run = simulate_taylor(mech, q, v, 2e-3, 0.02, every=5)
    assert run.rank_deficient_steps == 10
    assert not all(run.unique.values())
    kkt, _ = simulate_kkt(model, q, v, 2e-3, 0.02, every=5, gravity=(0.0, 0.0, -9.81))
    for name, ok in kkt.unique.items():
        a, b = kkt.columns[name]
        if not ok:
            assert np.isnan(kkt.reactions[:, a:b]).any()
        # both formulations leave the same components empty (Fz, Mx, My of every pivot), at every sample
        assert np.array_equal(np.isnan(run.reactions[:, a:b]), np.isnan(kkt.reactions[:, a:b])), name
        assert np.isnan(run.reactions[:, a:b]).all(axis=0).tolist() == [not ok and lab in ("Fz", "Mx", "My")
                                                                       for lab in run.labels[name]], name


def test_stewart_platform_against_constraint_dynamics():
    """Fig. 10 platform, motors at 10 N m: Taylor (both variants) and KKT agree with Pinocchio's constraintDynamics."""
    model = load_absolute_model(STEWART)
    q0 = assemble_loops(model, pin.neutral(model.pin_model))
    v0 = np.zeros(model.pin_model.nv)
    T = 0.3
    mech = prepare_mechanism(model, q0)
    runs = [simulate_taylor(mech, q0, v0, 2e-3, T, MOTORS, correction=c, every=25) for c in ("none", "project")]
    kkt, aghili = simulate_kkt(model, q0, v0, 2e-3, T, MOTORS, every=25)
    ref = simulate_reference(STEWART, q0, v0, T, runs[0].times, efforts=MOTORS)
    x_ref = body_positions(STEWART, ref.q, model.bodies)
    W = {p.name: p.wrench_basis for p in model.pairs}
    for run, tol_x, tol_f in ((runs[0], 1e-4, 0.5), (runs[1], 1e-4, 0.5), (kkt, 1e-9, 1e-5)):
        assert np.abs(run.x - x_ref).max() < tol_x
        for name in ("J1", "J4", "J8"):
            want = ref.reactions[name] @ W[name]  # project onto the pair's constraint wrenches
            assert np.abs(run.pair(name) - want).max() < tol_f, (run.formulation, name)
        assert all(run.unique.values())
    assert np.abs(aghili.pair("J2") - ref.reactions["J2"][:, :3]).max() < 1e-5


def test_projection_removes_the_velocity_gap_that_the_literal_scheme_keeps():
    model = load_absolute_model(PENDULUM, planar=True)
    q0, v0 = _pendulum_q(0.0, 0.0), np.zeros(2)
    mech = prepare_mechanism(model, q0, G_PLANE)
    from vtm_dynamics.core.reactions.taylor_reactions import velocity_rows, taylor_step

    s_lit = state_from_joints(mech, q0, v0)
    gaps = []
    for _ in range(50):
        s_lit, _, _ = taylor_step(mech, s_lit, 4e-3)
        nu = np.concatenate([np.concatenate([v, w]) for v, w in zip(s_lit.v, s_lit.w)])
        gaps.append(np.abs(velocity_rows(mech, s_lit) @ nu).max())
    assert gaps[-1] > 1e-5 and gaps[-1] > 5 * gaps[0]  # m/s: the literal step's velocity gap grows, never decays
    run = simulate_taylor(mech, q0, v0, 4e-3, 0.2, correction="project", every=50)
    assert run.formulation == "taylor-projected"


@pytest.mark.parametrize("kwargs, field", [({"dt": 0.0}, "dt"), ({"dt": float("nan")}, "dt"),
                                          ({"duration": -1.0}, "duration"), ({"correction": "x"}, "correction"),
                                          ({"max_steps": 3}, "duration"), ({"reactions_at": "t"}, "reactions_at")])
def test_bad_run_parameters_are_one_line_errors_naming_the_field(kwargs, field):
    model = load_absolute_model(PENDULUM, planar=True)
    q0 = _pendulum_q(0.0, 0.0)
    mech = prepare_mechanism(model, q0, G_PLANE)
    args = {"dt": 1e-3, "duration": 0.01} | kwargs
    with pytest.raises(TaylorError, match=field) as err:
        simulate_taylor(mech, q0, np.zeros(2), **args)
    assert "\n" not in str(err.value)


def test_unknown_motor_joint_is_refused():
    model = load_absolute_model(STEWART)
    q0 = assemble_loops(model, pin.neutral(model.pin_model))
    mech = prepare_mechanism(model, q0)
    with pytest.raises(TaylorError, match="torques"):
        simulate_taylor(mech, q0, np.zeros(model.pin_model.nv), 1e-3, 0.002, {"nope": 1.0})
