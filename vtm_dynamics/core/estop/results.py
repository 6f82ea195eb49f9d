"""Results of a stop prediction: the events (stick, slip, release, abrupt lock with the jump of Müller 2026,
eq. (22), impulses with the sign of eq. (21)) and the predicted stop with its time series and summary.

Units: SI (rad, rad/s, rad/s^2, N m, N m s, J, s, m). Spatial forces are (linear [N], angular [N m]) in each
joint's local frame (Pinocchio ``data.f``).
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field

import numpy as np

from vtm_dynamics.core.estop.limit_crossings import crossings_text


@dataclass(frozen=True)
class StopEvent:
    """One event. ``kind``: engage | stick | slip | release | lock | power_off. ``joints``: joints it concerns.
    ``v_minus``/``v_plus``/``dv`` [rad/s] (dv nonzero only for abrupt locks); ``impulses`` Lambda of the locked
    rows [N m s] (``impulse_joints`` names them; Müller 2026, eq. (21) sign); ``energy_loss`` [J] of the jump;
    ``holding_torques`` [N m] needed by each locked joint after the event (nan for free joints); ``wrenches``
    (njoints x 6) spatial force transmitted by each joint right after the event (RNEA with the post-event
    acceleration); ``impulse_wrenches`` (njoints x 6) impulsive spatial force of the jump [N s, N m s]."""

    time: float
    kind: str
    joints: tuple[str, ...]
    q: np.ndarray
    v_minus: np.ndarray
    v_plus: np.ndarray
    dv: np.ndarray
    impulses: np.ndarray
    impulse_joints: tuple[str, ...]
    energy_loss: float
    holding_torques: np.ndarray
    wrenches: np.ndarray
    impulse_wrenches: np.ndarray | None


@dataclass(frozen=True)
class RampRecord:
    """What the controlled ramp of a category-1 stop (IEC 60204-1; :mod:`.ramp`) assumed and what the drives did
    in it. Assumed: ``deceleration`` [rad/s^2] the deceleration limit of each joint, ``torque_limits`` [N m; N for
    prismatic joints] the drives' torque limit of each joint (0: none on that joint; None: none given; "urdf"
    resolved to the model's effort limits). Done: ``drive_energy`` [J] the mechanical energy the drives took out
    of the arm and its rotors from the E-stop to the power cut, (T + T_rotors + V) at the E-stop minus at the power
    cut (T: kinetic energy 1/2 v^T M v, T_rotors: 1/2 sum armature_i v_i^2, V: gravitational potential energy). The
    ramp is a prescribed motion of a frictionless model, so this is exactly the negative work of its drive torques;
    it is negative where the drives put energy in (a ramp slower than gravity would stop a rising arm)."""

    deceleration: np.ndarray
    torque_limits: np.ndarray | None
    drive_energy: float


@dataclass(frozen=True)
class StopPrediction:
    """Predicted stop. Time series (K samples, events appear twice: before and after): ``t`` [s], ``q`` (K x nq),
    ``v`` (K x nv) [rad/s], ``a`` (K x nv) [rad/s^2], ``tau_brake`` (K x nv) brake torque on each joint [N m]
    (sliding torque while sliding, needed holding torque while locked), ``tau_drive`` (K x nv) drive torque
    (category 1 ramp), ``locked`` (K x nv, bool) active set, ``brake_work`` (K) cumulative brake work [J] (<= 0),
    ``impulse_loss`` (K) cumulative kinetic energy lost in abrupt-lock jumps [J] (>= 0):
    E(t) - E(0) = brake_work - impulse_loss.

    Summary: ``stopped`` (all joints held before ``t_max``), ``stop_time`` [s] (last joint comes to rest; nan if
    not stopped), ``joint_stop_times`` [s] (per joint, when it came to rest for good), ``stopping_angles`` [rad; m
    for prismatic joints] (q_final (-) q_0, a continuous joint's travel counted in full turns), ``q_final`` (nq
    entries: a continuous joint as (cos, sin); one position per joint: :func:`.series.position_series`), ``brake_energy`` [J] dissipated by the brakes, ``impulse_energy`` [J] lost in
    jumps, ``holding_torques`` [N m] at rest, ``rest_wrenches`` (njoints x 6) at rest, ``pre_stop_wrenches``
    (from the caller's acceleration or torque, else None), TCP: ``tcp_frame``, ``tcp_positions`` (K x 3) [m],
    ``tcp_path_length`` [m] (integral of the TCP speed, see :func:`.prediction.tcp_path`),
    ``tcp_straight_distance`` [m]. Energies: ``initial_kinetic_energy`` [J] at the E-stop and
    ``potential_energy_change`` [J] (gravity, rest minus start). Category 1: ``power_off_time`` [s] (0 for
    category 0: power is cut at the E-stop) and ``ramp`` (:class:`RampRecord`: the ramp's assumed limits and the
    energy the drives took out; None for category 0). ``limit_crossings``: one line per joint the stop
    carries past its position limit (:mod:`.limit_crossings`; then the prediction is not the robot's stop:
    :attr:`valid`)."""

    joint_names: tuple[str, ...]
    category: int
    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    a: np.ndarray
    tau_brake: np.ndarray
    tau_drive: np.ndarray
    locked: np.ndarray
    brake_work: np.ndarray
    impulse_loss: np.ndarray
    events: tuple[StopEvent, ...]
    stopped: bool
    stop_time: float
    joint_stop_times: np.ndarray
    stopping_angles: np.ndarray
    q_final: np.ndarray
    brake_energy: float
    impulse_energy: float
    holding_torques: np.ndarray
    rest_wrenches: np.ndarray
    pre_stop_wrenches: np.ndarray | None
    tcp_frame: str | None
    tcp_positions: np.ndarray | None
    tcp_path_length: float
    tcp_straight_distance: float
    power_off_time: float = 0.0
    ramp: RampRecord | None = None
    initial_kinetic_energy: float = math.nan
    potential_energy_change: float = math.nan
    limit_crossings: tuple[str, ...] = ()
    n_steps: int = field(default=0, compare=False)
    n_evaluations: int = field(default=0, compare=False)

    @property
    def valid(self) -> bool:
        """Whether this is the robot's stop: at rest within the horizon, and no joint carried past its position
        limit (``limit_crossings``: the model has no end stops; :mod:`.limit_crossings`)."""
        return self.stopped and not self.limit_crossings

    def limit_text(self) -> str:
        """The joints carried past their limits, in one line ("" when none): an end stop would end that motion."""
        return crossings_text(self.limit_crossings)

    def not_stopped_text(self, braked: np.ndarray | None = None) -> str:
        """Why the prediction did not stop, in one line: the joints still free at the horizon, each marked "no
        brake" or "brake too weak?" where ``braked`` (bool per joint) is known; "" when it stopped."""
        if self.stopped:
            return ""
        free = [i for i, held in enumerate(np.asarray(self.locked[-1], dtype=bool)) if not held]
        names = [self.joint_names[i] + ("" if braked is None else " (brake too weak?)" if braked[i] else " (no brake)")
                 for i in free]
        return f"not stopped within the horizon ({self.t[-1]:.3f} s): still moving {', '.join(names) or '?'}"


    def invalid_label(self) -> str:
        """The short mark every output of a prediction that is not :attr:`valid` carries in its title or marker
        text: "NOT VALID: not at rest within the horizon", "NOT VALID: past a joint limit" (or both); "" when valid.
        The full reasons are :meth:`invalid_text`."""
        why = (["not at rest within the horizon"] if not self.stopped else []) + \
            (["past a joint limit"] if self.limit_crossings else [])
        return "NOT VALID: " + " and ".join(why) if why else ""

    def invalid_text(self, braked: np.ndarray | None = None) -> str:
        """Why this prediction is not the robot's stop, in one line ("" when :attr:`valid`): the joints still moving
        at the horizon (:meth:`not_stopped_text`) and those carried past a limit (:meth:`limit_text`)."""
        return "; ".join(x for x in (self.not_stopped_text(braked), self.limit_text()) if x)
