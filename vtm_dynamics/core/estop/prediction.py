"""The stop prediction facade: checks the inputs, runs the category-1 ramp and the braking engine, assembles the
result (Müller 2026, Secs. 6-7: braking, stick/slip, joint locks with the jump of eq. (22)).

Stop categories follow IEC 60204-1: category 0 removes the drive torque at t = 0 and each brake engages after its
delay (:mod:`vtm_dynamics.core.estop.brakes`); category 1 decelerates under the drives first (:mod:`.ramp`), then the
brakes engage at standstill (the drives hold until then) or power is cut at ``max_duration``. Pawls configured in
the brakes and ``LockEvent`` items become abrupt locks. Reactions are Pinocchio's RNEA spatial forces
(:mod:`.wrenches`); holding torques at rest are the generalized gravity. Units: SI (rad, rad/s, N m, J, s, m).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Iterable

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.abrupt_lock import JUMP_METHODS
from vtm_dynamics.core.estop.compiled_checks import inside_limits, positive_definite
from vtm_dynamics.core.estop.compiled_engine import CompiledEngine
from vtm_dynamics.core.estop.generated_dynamics import generated_stages
from vtm_dynamics.core.estop.event_loop import BrakingEngine, ScheduledLock
from vtm_dynamics.core.estop.limit_crossings import TOLERANCE as LIMIT_TOLERANCE, limit_crossings
from vtm_dynamics.core.estop.inputs import (
    CategoryOne, LockEvent, StopInputError, StopSettings, check_stop_state, stop_vector,
)
from vtm_dynamics.core.estop.ramp import Ramp, controlled_ramp
from vtm_dynamics.core.estop.results import RampRecord, StopPrediction
from vtm_dynamics.core.estop.runge_kutta import TABLEAUS
from vtm_dynamics.core.estop.series import travelled
from vtm_dynamics.core.estop.wrenches import joint_forces
from vtm_dynamics.core.robot.model import RobotModel


def predict_stop(
    robot: RobotModel,
    brakes: BrakeSet,
    q: object,
    v: object,
    *,
    a: object | None = None,
    tau: object | None = None,
    category: int = 0,
    category_one: CategoryOne | None = None,
    lock_events: Iterable[LockEvent] = (),
    tcp_frame: str | None = None,
    settings: StopSettings = StopSettings(),
) -> StopPrediction:
    """Predict the stop of ``robot`` from the pre-stop state (q [rad], v [rad/s]; optional acceleration a
    [rad/s^2] or joint torque tau [N m], used for the pre-stop reaction wrenches) with ``brakes``.

    Category 0 or 1 (IEC 60204-1, see the module docstring); ``lock_events`` add abrupt locks at given times
    (momentum-consistent jump, Müller 2026, eq. (22)); pawls configured in ``brakes`` are added automatically.
    ``tcp_frame`` names the frame whose stopping distance is reported. Pure: numpy in, a frozen dataclass out;
    uses ``robot.data`` as workspace (one RobotModel per thread).
    """
    return predict_with(robot, brakes, q, v, a=a, tau=tau, category=category, category_one=category_one,
                        lock_events=lock_events, tcp_frame=tcp_frame, settings=settings)


def predict_with(robot: RobotModel, brakes: BrakeSet, q: object, v: object, *, a: object | None = None,
                 tau: object | None = None, category: int = 0, category_one: CategoryOne | None = None,
                 lock_events: Iterable[LockEvent] = (), tcp_frame: str | None = None,
                 settings: StopSettings = StopSettings(), engines: dict | None = None,
                 generated: bool = False, checked: bool = False) -> StopPrediction:
    """:func:`predict_stop`, reusing the compiled engines in ``engines`` (one per model and settings; one dict per
    thread) instead of building one per prediction: the same code path, the same numbers. ``generated``: the
    compiled engine computes M and h with generated code inside one compiled call per step
    (:mod:`vtm_dynamics.core.estop.generated_dynamics`; Pinocchio when that is unavailable), for batches.
    ``checked``: q and v are float arrays that passed :func:`.inputs.check_stop_state`'s checks (a batch checks
    all its states at once, :func:`.inputs.states_pass_checks`)."""
    q0, v0 = (q, v) if checked else check_stop_state(robot, q, v)
    if brakes.joint_names != robot.joint_names:
        raise StopInputError("brakes: built for another robot (joint names differ)")
    _check_mass_matrix(robot, brakes, q0)
    if category not in (0, 1):
        raise StopInputError(f"category: must be 0 or 1, got {category!r}")
    if settings.jump_method not in JUMP_METHODS:
        raise StopInputError(f"jump_method: must be one of {', '.join(JUMP_METHODS)}, got {settings.jump_method!r}")
    if settings.method not in TABLEAUS:
        raise StopInputError(f"settings.method: must be one of {', '.join(TABLEAUS)}, got {settings.method!r}")
    if not (settings.step > 0 and settings.t_max > 0):
        raise StopInputError("settings.step: step and t_max must be positive")
    if settings.engine not in ENGINES:
        raise StopInputError(f"settings.engine: must be one of {', '.join(ENGINES)}, got {settings.engine!r}")
    if not (settings.rtol > 0 and settings.atol > 0 and settings.atol_velocity > 0):
        raise StopInputError("settings.rtol: rtol, atol and atol_velocity must be positive")
    pre = None
    if a is not None or tau is not None:
        if a is not None:
            acc = stop_vector(a, robot.nv, "a")
        else:
            acc = np.array(pin.aba(robot.model, robot.data, q0, v0, stop_vector(tau, robot.nv, "tau")))
        pin.rnea(robot.model, robot.data, q0, v0, acc)
        pre = joint_forces(robot.data, robot.model.njoints)
    frame_id = robot.frame_id(tcp_frame) if tcp_frame is not None else None

    samples: dict[str, list] = {k: [] for k in ("t", "q", "v", "a", "tau", "drive", "locked", "W", "J")}
    t_off, standstill, ramp = 0.0, False, None
    q_start, v_start = q0, v0
    engage = brakes.engage_delay.copy()
    if category == 1:
        ramp = controlled_ramp(robot, q0, v0, category_one or CategoryOne(), settings, samples, brakes.armature)
        t_off, q_start, v_start, standstill = ramp.t_off, ramp.q_off, ramp.v_off, ramp.standstill
        if standstill:
            engage, brakes = _held_until_braked(brakes)
        engage = engage + t_off
    engage = np.where(brakes.braked, engage, np.inf)
    locks = []
    for i in np.flatnonzero(np.isfinite(brakes.pawl_delay)):
        locks.append(ScheduledLock(t_off + brakes.pawl_delay[i], np.array([i]),
                                   np.array([brakes.pawl_holding_torque[i]])))
    for ev in lock_events:
        if not isinstance(ev, LockEvent):
            raise StopInputError("lock_events: expected LockEvent items")
        try:
            idx = robot.v_indices(ev.joints)
        except ValueError:
            raise StopInputError(f"lock_events.joints: unknown joint in {ev.joints}") from None
        if not (np.isfinite(ev.time) and ev.time >= 0):
            raise StopInputError(f"lock_events.time: must be finite and >= 0, got {ev.time}")
        locks.append(ScheduledLock(ev.time, idx, np.full(idx.size, ev.holding_torque)))
    if compiled_engine_applies(robot, settings):
        key = (id(robot), settings, generated)
        engine = engines.get(key) if engines is not None else None
        if engine is None:
            engine = CompiledEngine(robot, brakes, settings, generated_stages(robot) if generated else None)
            if engines is not None:
                engines[key] = engine
        engine.brakes = brakes
        t_fin, q_fin, v_fin, W = engine.run(t_off, q_start, v_start, engage, locks,
                                            samples["W"][-1] if samples["W"] else 0.0)
        series = _series(samples, engine.samples, robot.nv)
    else:
        engine = BrakingEngine(robot, brakes, settings)
        t_fin, q_fin, v_fin, W = engine.run(t_off, q_start, v_start, engage, locks, samples)
        series = {k: np.array(x) for k, x in samples.items()}
    t_arr, q_arr, v_arr = series["t"], series["q"], series["v"]
    stopped = bool(engine.locked.all())
    joint_stop = _joint_stop_times(engine.rest_since, category, t_off, standstill, v0)
    stop_time = float(joint_stop.max()) if stopped else math.nan
    if category == 1 and stopped:
        # at standstill the controlled ramp already stopped the joints; brakes only hold
        stop_time = float(max(stop_time if np.isfinite(stop_time) else 0.0, 0.0))
    pin.rnea(robot.model, robot.data, q_fin, np.zeros(robot.nv), np.zeros(robot.nv))
    rest_w = joint_forces(robot.data, robot.model.njoints)
    holding = np.array(pin.computeGeneralizedGravity(robot.model, robot.data, q_fin)) if stopped else \
        np.full(robot.nv, np.nan)
    tcp_pos = None
    path = straight = math.nan
    if frame_id is not None:
        tcp_pos, path = tcp_path(robot, frame_id, t_arr, q_arr, v_arr, series["a"])
        straight = float(np.linalg.norm(tcp_pos[-1] - tcp_pos[0]))
    W_arr = series["W"]
    # a continuous joint's end points give its travel only modulo 2 pi: sum the steps between the samples instead
    # (on a vector configuration space the difference is q_fin - q0, as Pinocchio's difference computes it)
    stopping = q_fin - q0 if robot.nq == robot.nv else travelled(robot, q_arr)[-1]
    return StopPrediction(
        joint_names=robot.joint_names, category=category, t=t_arr, q=q_arr, v=v_arr, a=series["a"],
        tau_brake=series["tau"], tau_drive=series["drive"], locked=series["locked"],
        brake_work=W_arr, impulse_loss=series["J"], events=tuple(engine.events), stopped=stopped,
        stop_time=stop_time, joint_stop_times=joint_stop, stopping_angles=stopping,
        q_final=q_fin, brake_energy=float(-W_arr[-1]), impulse_energy=engine.impulse_energy,
        holding_torques=holding, rest_wrenches=rest_w, pre_stop_wrenches=pre, tcp_frame=tcp_frame,
        tcp_positions=tcp_pos, tcp_path_length=path, tcp_straight_distance=straight, power_off_time=t_off,
        ramp=_ramp_record(robot, brakes.armature, q0, v0, ramp) if ramp is not None else None,
        initial_kinetic_energy=_kinetic_energy(robot, q0, v0) + (  # plus the rotors' (armature) kinetic energy
            0.5 * float(brakes.armature @ (v0 * v0)) if (brakes.armature > 0.0).any() else 0.0),
        potential_energy_change=_potential_energy(robot, q_fin) - _potential_energy(robot, q0),
        limit_crossings=_limit_crossings(robot, q_arr), n_steps=engine.n_steps, n_evaluations=engine.n_eval,
    )


def _limit_crossings(robot: RobotModel, q: np.ndarray) -> tuple[str, ...]:
    """:func:`.limit_crossings.limit_crossings` of the configurations q, after a compiled screen (most stops stay
    within their limits; the screen costs a tenth of the numpy one)."""
    model = robot.model
    if len(q) and inside_limits(q, model.lowerPositionLimit, model.upperPositionLimit, LIMIT_TOLERANCE):
        return ()
    return limit_crossings(robot, q)


def _kinetic_energy(robot: RobotModel, q: np.ndarray, v: np.ndarray) -> float:
    """1/2 v^T M(q) v [J] of a checked state (RobotModel.kinetic_energy without its input checks)."""
    return float(pin.computeKineticEnergy(robot.model, robot.data, q, v))


def _potential_energy(robot: RobotModel, q: np.ndarray) -> float:
    """Gravitational potential energy [J] at a checked configuration (RobotModel.potential_energy unchecked)."""
    return float(pin.computePotentialEnergy(robot.model, robot.data, q))


def _ramp_record(robot: RobotModel, armature: np.ndarray, q0: np.ndarray, v0: np.ndarray, ramp: Ramp) -> RampRecord:
    """What a category-1 ramp from (q0 [rad], v0 [rad/s]) assumed, and the energy [J] its drives took out up to the
    power cut: the arm's and rotors' mechanical energy at the E-stop minus at the cut (:class:`.results.RampRecord`)."""
    drive_energy = _mechanical_energy(robot, armature, q0, v0) - _mechanical_energy(robot, armature, ramp.q_off,
                                                                                     ramp.v_off)
    return RampRecord(ramp.deceleration, ramp.torque_limits, drive_energy)


def _mechanical_energy(robot: RobotModel, armature: np.ndarray, q: np.ndarray, v: np.ndarray) -> float:
    """Kinetic energy of the arm 1/2 v^T M(q) v and of its rotors 1/2 sum armature_i v_i^2 plus the gravitational
    potential energy at q [J] (Pinocchio)."""
    return robot.kinetic_energy(q, v) + 0.5 * float(armature @ (v * v)) + robot.potential_energy(q)


def _joint_stop_times(rest_since: np.ndarray, category: int, t_off: float, standstill: bool,
                      v0: np.ndarray) -> np.ndarray:
    """Each joint's stop time [s] from the instant the engine saw it come to rest (``rest_since``): never before the
    trigger; after a category-1 ramp to standstill, 0 for a joint at rest at the trigger (the drives held it still),
    not the power cut."""
    joint_stop = np.array(rest_since, dtype=float)
    if category == 1 and t_off > 0:
        joint_stop = np.where(np.isfinite(joint_stop), np.maximum(joint_stop, 0.0), joint_stop)
    if standstill:
        joint_stop = np.where(np.asarray(v0) == 0.0, 0.0, joint_stop)
    return joint_stop


ENGINES = ("compiled", "python")


def _held_until_braked(brakes: BrakeSet) -> tuple[np.ndarray, BrakeSet]:
    """Category 1 ending at standstill: the drives hold the arm until the brakes hold it, so at the power cut every
    brake is engaged with its torque fully risen (engage delays 0 s after the cut, rise times 0 s). Returns the
    engage delays [s] and the brakes. A brake whose capacity rose from zero at the cut let the arm sag: with the
    shipped UR5 brakes (5 ms rise) every joint slipped and stopped 1-5 ms after the ramp."""
    n = len(brakes.engage_delay)
    return np.zeros(n), replace(brakes, rise_time=np.zeros(n))


def _check_mass_matrix(robot: RobotModel, brakes: BrakeSet, q0: np.ndarray) -> None:
    """Refuse (one line) a model whose mass matrix M(q0) + diag(armature) [kg m^2, kg] is not positive definite at
    the start state: a joint that moves no mass (a massless link at the end of the chain) has no acceleration and
    no jump of eq. (22). The engines used to fail inside the first step (a RuntimeError trace, or NaN angles)."""
    # compiled Cholesky pivots on the upper triangle CRBA fills: 0.3 us where numpy's took 5 us, in every prediction
    M = pin.crba(robot.model, robot.data, q0)
    if not positive_definite(M, brakes.armature):
        M = M.T + np.diag(brakes.armature)
        i = int(np.argmin(np.diag(M)))
        raise StopInputError(
            f"urdf: the mass matrix is not positive definite at q (smallest diagonal entry {M[i, i]:.3g}, joint "
            f"{robot.joint_names[i]!r}): a joint moves no mass or inertia; give its links mass and inertia or "
            "an armature in the brake file") from None


def compiled_engine_applies(robot: RobotModel, settings: StopSettings) -> bool:
    """Whether the compiled engine runs this prediction: asked for (``settings.engine``), the Dormand-Prince method,
    and a model whose configuration is a vector (revolute and prismatic joints); else the Python engine does."""
    # (a Pinocchio joint has nq >= nv, so nq == nv for the model means it for every joint)
    return settings.engine == "compiled" and settings.method == "dp5" and robot.nq == robot.nv


def _series(ramp: dict[str, list], rows: np.ndarray, nv: int) -> dict[str, np.ndarray]:
    """The time series of a prediction from the ramp's samples (category 1, lists) and the compiled engine's sample
    rows (t, W, J, q, v, a, tau, locked)."""
    out = {"t": rows[:, 0], "W": rows[:, 1], "J": rows[:, 2], "q": rows[:, 3:3 + nv],
           "v": rows[:, 3 + nv:3 + 2 * nv], "a": rows[:, 3 + 2 * nv:3 + 3 * nv],
           "tau": rows[:, 3 + 3 * nv:3 + 4 * nv], "locked": rows[:, 3 + 4 * nv:3 + 5 * nv] > 0.5,
           "drive": np.zeros((len(rows), nv))}
    if ramp["t"]:
        out = {k: np.concatenate([np.array(ramp[k]).reshape((len(ramp["t"]),) + x.shape[1:]).astype(x.dtype), x])
               for k, x in out.items()}
    else:
        out = {k: np.ascontiguousarray(x) for k, x in out.items()}
    return out


def tcp_path(robot: RobotModel, frame_id: int, t: np.ndarray, q: np.ndarray, v: np.ndarray,
             a: np.ndarray) -> tuple[np.ndarray, float]:
    """TCP positions (K x 3) [m] at the samples and the length [m] of the path it travels, the integral of its speed
    s = |p'| over time. Between two samples s is integrated by the cubic Hermite rule
    h (s0 + s1) / 2 + h^2 (s0' - s1') / 12 with s' = p'.p'' / |p'| from the frame's linear velocity and classical
    acceleration (exact for cubic s; the sum of chords between the samples was short by up to 1e-3 on short stops).
    Where the TCP comes to rest or reverses inside an interval (s not smooth there) the trapezoid h (s0 + s1) / 2
    is used; zero-length intervals (the two samples of an event) add nothing."""
    model, data = robot.model, robot.data
    K = len(t)
    pos, speed, dspeed = np.empty((K, 3)), np.empty(K), np.empty(K)
    world = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    for n in range(K):
        pin.forwardKinematics(model, data, q[n], v[n], a[n])
        pos[n] = pin.updateFramePlacement(model, data, frame_id).translation
        vel = pin.getFrameVelocity(model, data, frame_id, world).linear
        acc = pin.getFrameClassicalAcceleration(model, data, frame_id, world).linear
        speed[n] = math.sqrt(float(vel @ vel))
        dspeed[n] = float(vel @ acc) / speed[n] if speed[n] > 0.0 else math.nan
    h = np.diff(t)
    trapezoid = 0.5 * h * (speed[:-1] + speed[1:])
    correction = h * h * (dspeed[:-1] - dspeed[1:]) / 12.0
    smooth = np.isfinite(correction) & (np.abs(correction) < 0.5 * np.abs(trapezoid))
    return pos, float(np.sum(trapezoid + np.where(smooth, correction, 0.0)))
