"""The trajectory check: does every emergency stop along a planned motion end clear of the scene?

Müller 2026, Sec. 1 asks for "safe motion planning ensuring that at any time the system can be stopped"; the
stop itself is the braked, locking motion of eqs. (3) and (22) (:mod:`vtm_dynamics.core.estop`). The check
samples E-stop instants along the trajectory (:mod:`.sampling`), predicts every case of every instant through the
one prediction entry point (:func:`.stop_cases.predict_stops`), sweeps the robot's collision geometry along each
predicted stop against the scene and its own parts (:mod:`.sweep`), and refines the instants until the bound
between them meets the tolerance. :class:`TrajectoryChecker` holds what stays the same between checks (models,
geometry, scene, sweeper) so that a node or the speed-scaling search calls it in one line; inputs are by joint
name, every size is capped, and ``cancel``/``deadline`` stop it between batches. Units: SI.
"""

from __future__ import annotations

import math
import time as _time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from vtm_dynamics.core.estop import StopPrediction
from vtm_dynamics.core.estop.limit_crossings import crossings_text
from vtm_dynamics.core.stopsafe.broad_phase import scene_bodies
from vtm_dynamics.core.stopsafe.results import SampleResult, TrajectoryCheck, WorstStop
from vtm_dynamics.core.stopsafe.robot_geometry import RobotGeometry
from vtm_dynamics.core.stopsafe.sampling import (
    Instants, SamplingSpec, refinement, sampling_bounds, states, uniform_instants,
)
from vtm_dynamics.core.stopsafe.scene import Scene, SceneError
from vtm_dynamics.core.stopsafe.stop_cases import CheckCancelled, StopSetup, predict_stops, stop_times
from vtm_dynamics.core.stopsafe.sweep import StateClearance, Sweeper, SweepSettings
from vtm_dynamics.core.stopsafe.trajectory import (
    PlannedTrajectory, TrajectoryError, check_limits, model_order,
)

MAX_MARGIN = 10.0  # [m]


@dataclass(frozen=True)
class CheckSettings:
    """``margin`` [m] from the scene and ``self_margin`` [m] between the robot's own parts; the E-stop instants
    (``sampling``); the sweep's ``pose_tolerance`` [m], ``far_fraction`` and ``coarse_step`` [m]
    (:class:`~.sweep.SweepSettings`); ``batch`` states predicted and swept together."""

    margin: float = 0.02
    self_margin: float = 0.0
    sampling: SamplingSpec = field(default_factory=SamplingSpec)
    pose_tolerance: float = 0.005
    far_fraction: float = 0.1
    coarse_step: float = 0.04
    batch: int = 32

    def check(self) -> None:
        for name in ("margin", "self_margin"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and -1.0 <= value <= MAX_MARGIN):
                raise TrajectoryError(f"{name}: expected -1..{MAX_MARGIN:g} m, got {value!r}")
        for name, lo, hi in (("pose_tolerance", 1e-5, 1.0), ("far_fraction", 0.0, 1.0), ("coarse_step", 1e-4, 1.0)):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and lo <= value <= hi):
                raise TrajectoryError(f"{name}: expected {lo:g}..{hi:g}, got {value!r}")
        if not (isinstance(self.batch, int) and 1 <= self.batch <= 4096):
            raise TrajectoryError(f"batch: expected 1..4096, got {self.batch!r}")
        self.sampling.check()

    def sweep_settings(self) -> SweepSettings:
        return SweepSettings(pose_tolerance=self.pose_tolerance, far_fraction=self.far_fraction,
                             coarse_step=self.coarse_step, margin=self.margin, self_margin=self.self_margin)


class TrajectoryChecker:
    """Checks trajectories of one robot against one scene (module docstring). Build once, call :meth:`check`;
    one instance per thread. ``setup.robot`` must be ``geometry.robot`` (the same kinematic model)."""

    def __init__(self, setup: StopSetup, geometry: RobotGeometry, scene: Scene,
                 settings: CheckSettings = CheckSettings(), tcp_frame: str | None = None) -> None:
        settings.check()
        if setup.robot.joint_names != geometry.robot.joint_names:
            raise TrajectoryError("geometry: built for another model than the stop predictions (joint names differ)")
        if scene.empty:
            raise SceneError("scene: empty (no obstacle, no floor and self_collision off): nothing to check against")
        geometry.set_self_pairs(scene.self_collision, scene.allowed_self_pairs)
        self.setup, self.geometry, self.scene, self.settings = setup, geometry, scene, settings
        self.sweeper = Sweeper(geometry, scene_bodies(scene, geometry.shapes), settings.sweep_settings(), tcp_frame)
        if self.sweeper.n_slots == 0:
            raise SceneError("scene: nothing to check (no obstacle or floor, and no pair of the robot's parts may "
                             "collide)")
        self.tcp_frame = tcp_frame
        self._scene_slots = ~self.sweeper.slot_self

    @property
    def cases(self) -> tuple[str, ...]:
        return tuple(c.label() for c in self.setup.cases)

    def seconds_per_stop(self, trajectory: PlannedTrajectory, n: int = 2) -> float:
        """Measured cost [s] of one predicted and swept stop on this machine (a few stops at the first point)."""
        order = model_order(self.setup.robot, trajectory)
        inst = Instants(np.full(n, trajectory.start), np.zeros(n, dtype=bool))
        q, v = states(trajectory, order, inst)
        start = _time.perf_counter()
        self.sweeper.sweep(predict_stops(self.setup, q, v))
        return (_time.perf_counter() - start) / (n * len(self.setup.cases))

    # ------------------------------------------------------------------ the check
    def check(self, trajectory: PlannedTrajectory, *, cancel: Callable[[], bool] | None = None,
              deadline: float | None = None, progress: Callable[[int, int], None] | None = None,
              stop_at_unsafe: bool = False, first_phases: np.ndarray | None = None) -> TrajectoryCheck:
        """Check ``trajectory`` (see the module docstring). ``deadline`` is a ``time.monotonic()`` value; past it,
        or when ``cancel()`` is true, :class:`CheckCancelled` is raised between batches. ``progress(done,
        total)`` counts samples. With ``stop_at_unsafe`` the check returns at the first unsafe batch
        (``complete`` False; the speed-scaling search uses it); ``first_phases`` (fractions of the duration) are
        checked first."""
        order = model_order(self.setup.robot, trajectory)
        check_limits(self.setup.robot, trajectory, order)
        spec = self.settings.sampling
        rate = spec.rate if spec.rate is not None else spec.initial_rate
        instants = uniform_instants(trajectory, rate, spec.max_samples)
        done: dict[tuple[float, bool], tuple[StateClearance, tuple[StopPrediction, ...], np.ndarray, np.ndarray]] = {}
        rounds = 0
        n_stops = 0

        def poll() -> None:
            if cancel is not None and cancel():
                raise CheckCancelled("cancelled: the caller asked to stop")
            if deadline is not None and _time.monotonic() > deadline:
                raise CheckCancelled("deadline: the check did not finish in time")

        def run(inst: Instants) -> bool:
            """Predict and sweep the instants not done yet; False when stopped at an unsafe sample."""
            nonlocal n_stops
            todo = [k for k in range(len(inst)) if (float(inst.t[k]), bool(inst.left[k])) not in done]
            if first_phases is not None and len(todo) > 1 and trajectory.duration > 0:
                phase = (inst.t[todo] - trajectory.start) / trajectory.duration
                near = np.min(np.abs(phase[:, None] - np.asarray(first_phases)[None, :]), axis=1)
                todo = [todo[k] for k in np.argsort(near, kind="stable")]
            q_all, v_all = states(trajectory, order, inst)
            for b in range(0, len(todo), self.settings.batch):
                poll()
                chunk = todo[b:b + self.settings.batch]
                preds = predict_stops(self.setup, q_all[chunk], v_all[chunk], cancel=cancel)
                n_stops += len(chunk) * len(self.setup.cases)
                swept = self.sweeper.sweep(preds)
                for k, p, c in zip(chunk, preds, swept):
                    done[(float(inst.t[k]), bool(inst.left[k]))] = (c, p, q_all[k], v_all[k])
                if progress is not None:
                    progress(len(done), max(len(done), len(inst)))
                if stop_at_unsafe and any(_quick_unsafe(c, p, self.settings) for c, p in zip(swept, preds)):
                    return False
            return True

        complete = run(instants)
        tolerance = spec.tolerance if spec.rate is None else None
        while complete:
            bounds, suspect = self._bounds(trajectory, order, instants, done)
            over = (bounds.max(axis=1) > spec.tolerance) if len(bounds) else np.zeros(0, bool)
            if spec.rate is not None or rounds >= spec.max_rounds or not (over.any() or suspect.any()):
                break
            extra = refinement(instants, bounds.max(axis=1), spec.tolerance, suspect, spec.max_samples - len(instants))
            if extra.size == 0:
                break
            instants = instants.merged(extra)
            rounds += 1
            complete = run(instants)
        if not complete:
            keys = sorted(done)
            instants = Instants(np.array([t for t, _ in keys]), np.array([left for _, left in keys]))
        return self._result(trajectory, order, instants, done, rounds, n_stops, complete, tolerance)

    # ------------------------------------------------------------------ pieces
    def _bounds(self, trajectory, order, instants: Instants, done) -> tuple[np.ndarray, np.ndarray]:
        """Sampling bounds (intervals x 2: scene, self) and suspect intervals (neighbours differ beyond them)."""
        keys = list(zip(instants.t.tolist(), instants.left.tolist()))
        T = np.array([stop_times(done[k][1])[1] for k in keys])
        W = self.sweeper.weights
        e = sampling_bounds(trajectory, order, instants, T, W)
        scene = self._scene_slots
        e_scene = e[:, scene].max(axis=1) if scene.any() else np.zeros(len(e))
        e_self = e[:, ~scene].max(axis=1) if (~scene).any() else np.zeros(len(e))
        bounds = np.column_stack((e_scene, e_self))
        c = np.array([[done[k][0].scene.value, done[k][0].self.value] for k in keys])
        r = np.array([[done[k][0].scene.resolution, done[k][0].self.resolution] for k in keys])
        with np.errstate(invalid="ignore"):
            jump = np.abs(np.diff(c, axis=0))
            allowed = 2.0 * bounds + r[:-1] + r[1:]
            suspect = np.any(np.isfinite(jump) & (jump > allowed + 1e-9), axis=1)
        return bounds, suspect

    def _result(self, trajectory, order, instants: Instants, done, rounds, n_stops, complete,
                tolerance) -> TrajectoryCheck:
        keys = list(zip(instants.t.tolist(), instants.left.tolist()))
        bounds, suspect = self._bounds(trajectory, order, instants, done)
        n = len(keys)
        side = np.zeros((n, 2))
        if n > 1:
            side[:-1] = bounds
            side[1:] = np.maximum(side[1:], bounds)
        m, ms = self.settings.margin, self.settings.self_margin
        labels = self.cases
        samples = []
        for i, k in enumerate(keys):
            c, preds, q, v = done[k]
            worst_time, _ = stop_times(preds)
            stopped = all(p.stopped for p in preds)
            cert = c.scene.value - c.scene.resolution - side[i, 0]
            cert_self = c.self.value - c.self.resolution - side[i, 1]
            reasons = []
            if not stopped:
                reasons.append("a case did not stop within the horizon")
            crossed = [(label, p) for label, p in zip(labels, preds) if p.limit_crossings]
            if crossed:  # the model has no end stops: an end stop, not the brake, would end this stop
                more = f" (and {len(crossed) - 1} more cases)" if len(crossed) > 1 else ""
                reasons.append(f"case ({crossed[0][0]}): {crossings_text(crossed[0][1].limit_crossings)}{more}")
            if cert < m:
                reasons.append(f"{c.scene.pair[0]} within {cert:.4f} m of {c.scene.pair[1]} (margin {m:g} m)")
            if cert_self < ms:
                reasons.append(f"{c.self.pair[0]} within {cert_self:.4f} m of {c.self.pair[1]} (self margin {ms:g} m)")
            samples.append(SampleResult(
                index=i, time=k[0], q=q, v=v, stop_time=worst_time, tcp_distance=c.tcp_distance, stopped=stopped,
                clearance=c.scene.value, resolution=c.scene.resolution, sampling_bound=float(side[i, 0]),
                pair=c.scene.pair, case=c.scene.case, stop_instant=c.scene.time, self_clearance=c.self.value,
                self_resolution=c.self.resolution, self_sampling_bound=float(side[i, 1]), self_pair=c.self.pair,
                safe=not reasons, reason="; ".join(reasons),
                limit_crossings=tuple(crossed[0][1].limit_crossings) if crossed else ()))
        unsafe = [s for s in samples if not s.safe]
        worst = self._worst(samples, done, keys)
        over = int(np.sum(bounds.max(axis=1) > tolerance)) if tolerance is not None and len(bounds) else 0
        return TrajectoryCheck(
            joint_names=trajectory.joint_names, samples=tuple(samples), safe=complete and not unsafe,
            first_unsafe=unsafe[0] if unsafe else None, worst=worst, margin=m, self_margin=ms, cases=self.cases,
            tolerance=tolerance, max_sampling_bound=float(bounds.max()) if bounds.size else 0.0,
            intervals_over_tolerance=over, suspect_intervals=int(np.sum(suspect)), rounds=rounds, n_stops=n_stops,
            exact_calls=sum(done[k][0].scene.exact_calls + done[k][0].self.exact_calls for k in keys),
            complete=complete, trajectory_duration=trajectory.duration)

    def _worst(self, samples, done, keys) -> WorstStop | None:
        if not samples:
            return None
        m, ms = self.settings.margin, self.settings.self_margin
        excess = [min(s.certified_clearance - m, s.certified_self_clearance - ms) for s in samples]
        i = int(np.argmin(excess))
        s = samples[i]
        c, preds, _, _ = done[keys[i]]
        clear = c.scene if s.certified_clearance - m <= s.certified_self_clearance - ms else c.self
        kind = "scene" if clear is c.scene else "self"
        return WorstStop(sample=s, predictions=preds, case=clear.case, pair=clear.pair, points=clear.points,
                         stop_instant=clear.time, q_at=clear.q, kind=kind)


def _quick_unsafe(c: StateClearance, preds, settings: CheckSettings) -> bool:
    """Unsafe before any sampling bound is added (the bound only lowers the certified clearance); a case that did
    not stop or went past a joint limit is unsafe whatever the clearance."""
    return (not all(p.valid for p in preds) or c.scene.value - c.scene.resolution < settings.margin
            or c.self.value - c.self.resolution < settings.self_margin)
