"""Sweep the robot's collision geometry along predicted stopping paths: the smallest clearance during each stop.

The stopping path of a predicted stop (Müller 2026, eqs. (3) and (22) with brakes, :mod:`.stop_cases`) is known at
the engine's samples (t_k, q_k, v_k, a_k). Between two samples every joint moves by at most
|dq_j| <= h (|v_j,k| + |v_j,k+1| + A_j h) / 2 with A_j = max(|a_j,k|, |a_j,k+1|) (the speed is at most the
smaller of its two ends plus A_j times the time from them), so every point of part g moves by at most
D_g = sum_j R[g, j] |dq_j| (:mod:`.robot_geometry`). Two parts of the robot move rigidly together with the joints
above both of them, which leave their distance unchanged, so their distance changes by at most
sum_j (R[a, j] + R[b, j]) |dq_j| over the joints that carry only one of them. A distance d between a part and an obstacle is 1-Lipschitz in
the points' positions; at any instant between the samples the part is within D_a of its pose at t_k and D_b of
its pose at t_k+1 (D_a + D_b <= D), so the distance there is at least

    L = max((d_k + d_k+1 - D) / 2, max(d_k, d_k+1) - D)                                   (interval bound)

and the same holds with sphere lower bounds in place of d (broad phase) and with D_g + D_h for two parts of the
robot. The sweep is a branch and bound over (case, interval, pair): broad-phase bounds at every sample of every
case (numpy, many stops at once), exact coal distances only where a bound is below the best distance found,
intervals halved (the pose between them from the cubic Hermite polynomial of q with v) while their bound stays
below best - eps. It ends when no interval can hold a distance below best - eps, so the reported clearance C of a
state (the minimum over its cases) satisfies C - eps <= true minimum <= C, with eps = ``pose_tolerance`` near the
margin and ``far_fraction`` x (C - margin) far from it. The scene (obstacles, floor) and the robot's own parts are
searched separately: two clearances per state, each against its own margin. Units: m, s, rad.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.estop import StopPrediction
from vtm_dynamics.core.stopsafe.broad_phase import (
    Body, capsule_pair_bounds, part_body_bounds, part_body_support_bounds, part_pair_bounds,
)
from vtm_dynamics.core.stopsafe.enclosure import enclosed, is_mesh
from vtm_dynamics.core.stopsafe.robot_geometry import RobotGeometry

MAX_REFINEMENTS = 20_000  # exact evaluations of one state's search beyond which it reports what it reached


@dataclass(frozen=True)
class SweepSettings:
    """``pose_tolerance`` [m]: resolution of a clearance within a stop near its margin; ``far_fraction``: the
    resolution far from the margin as a fraction of the clearance above it; ``coarse_step`` [m]: how far the
    fastest slot may move between the samples of the broad phase; ``hull_range`` [m]: the convex hulls' bounds
    are computed only where the spheres' bound is below it (farther, the spheres' bound is close enough); ``margin`` [m] the clearance asked
    for from the scene, ``self_margin`` [m] between the robot's own parts."""

    pose_tolerance: float = 0.005
    far_fraction: float = 0.1
    coarse_step: float = 0.04
    hull_range: float = 0.1
    margin: float = 0.02
    self_margin: float = 0.0

    def resolution(self, clearance: float, margin: float) -> float:
        """eps [m] for a clearance ``clearance`` searched against ``margin``."""
        if not math.isfinite(clearance):
            return self.pose_tolerance
        return max(self.pose_tolerance, self.far_fraction * (clearance - margin))


@dataclass(frozen=True)
class Clearance:
    """The smallest distance [m] of one kind (scene or self) over a state's stops: exact at ``time`` [s] into the
    stop of case ``case``, ``resolution`` [m] (the true minimum over the continuous stops is at most that much
    lower), the ``pair`` (robot link, obstacle or link) with nearest ``points`` (2 x 3, world, robot link first)
    and the configuration ``q`` there; inf (and an empty pair) when there is nothing of that kind."""

    value: float
    resolution: float
    case: int
    time: float
    pair: tuple[str, str]
    points: np.ndarray
    q: np.ndarray | None
    exact_calls: int


@dataclass(frozen=True)
class StateClearance:
    """The sweep of one state's stops: the ``scene`` and ``self`` :class:`Clearance` and ``tcp_distance`` [m]
    (largest straight-line TCP travel over the cases, nan without a TCP frame)."""

    scene: Clearance
    self: Clearance
    tcp_distance: float


NO_CLEARANCE = Clearance(math.inf, 0.0, 0, math.nan, ("", ""), np.full((2, 3), np.nan), None, 0)


class Sweeper:
    """Sweeps the stops of many states against the scene (module docstring). One sweeper per thread.

    Slots are the (part, obstacle) pairs of the moving parts (a part fixed to the world never moves: its
    contact with the surface it is mounted on is by design) and the robot's own part pairs; ``weights``
    (slots x nv) turn joint displacements into the slot's distance change bound."""

    def __init__(self, geometry: RobotGeometry, bodies: Sequence[Body], settings: SweepSettings = SweepSettings(),
                 tcp_frame: str | None = None) -> None:
        import coal

        self.geometry = geometry
        self.bodies = tuple(bodies)
        self.settings = settings
        G, B = len(geometry.parts), len(self.bodies)
        moving = np.array([p.joint != 0 for p in geometry.parts])
        pairs = self.self_pairs = geometry.self_pairs.copy()  # the geometry's choice when built
        scene_a = np.repeat(np.arange(G), B)
        scene_b = np.tile(np.arange(B), G)
        keep = moving[scene_a]
        self._scene_keep = keep
        self._moving = [int(g) for g in np.flatnonzero(moving)]
        self.slot_a = np.concatenate((scene_a[keep], pairs[:, 0])).astype(int)
        self.slot_b = np.concatenate((scene_b[keep], pairs[:, 1])).astype(int)
        self.slot_self = np.concatenate((np.zeros(int(keep.sum()), bool), np.ones(len(pairs), bool)))
        self.n_slots = len(self.slot_a)
        R = geometry.radii
        W = R[self.slot_a].copy()
        for k in np.flatnonzero(self.slot_self):
            a, b = self.slot_a[k], self.slot_b[k]
            only_one = (R[a] > 0) != (R[b] > 0)
            W[k] = np.where(only_one, R[a] + R[b], 0.0)
        self.weights = W
        model = geometry.robot.model
        self._model, self._data = model, model.createData()
        self._req, self._res = coal.DistanceRequest(), coal.DistanceResult()
        self._shapes = [(geometry.parts[a].shape, geometry.parts[b].shape if own else self.bodies[b].shape)
                        for a, b, own in zip(self.slot_a, self.slot_b, self.slot_self)]
        self._functors = [coal.ComputeDistance(a, b) for a, b in self._shapes]
        self._enclosing = [is_mesh(a) or is_mesh(b) for a, b in self._shapes]  # a mesh's distance is its surface's
        self.tcp = None
        if tcp_frame is not None:
            fid = geometry.robot.frame_id(tcp_frame)
            f = model.frames[fid]
            self.tcp = (int(f.parentJoint), np.array(f.placement.rotation), np.array(f.placement.translation))

    # ------------------------------------------------------------------ names
    def slot_names(self, s: int) -> tuple[str, str]:
        a = self.geometry.parts[self.slot_a[s]].link
        b = self.geometry.parts[self.slot_b[s]].link if self.slot_self[s] else self.bodies[self.slot_b[s]].name
        return a, b

    # ------------------------------------------------------------------ bounds
    def pose_bounds(self, Rs: np.ndarray, ps: np.ndarray) -> np.ndarray:
        """Broad-phase lower bounds (P x slots) [m] at poses given by their joint frames: against an obstacle the
        larger of the sphere bound and the convex hull's separating-axis bound, between parts the larger of the
        sphere and the capsule bound."""
        g = self.geometry
        centers, radii, owner = g.sphere_centers(Rs, ps)
        scene = part_body_bounds(centers, radii, owner, len(g.parts), self.bodies)
        if self.bodies and self._moving:
            scene = np.maximum(scene, part_body_support_bounds(Rs, ps, g.parts, self._moving, self.bodies, scene,
                                                               self.settings.hull_range))
        scene = scene.reshape(len(ps), -1)[:, self._scene_keep]
        own = part_pair_bounds(centers, radii, owner, self.self_pairs)
        if len(self.self_pairs):
            own = np.maximum(own, capsule_pair_bounds(*g.capsules(Rs, ps), self.self_pairs))
        return np.concatenate((scene, own), axis=1)

    # ------------------------------------------------------------------ exact distances
    def exact(self, s: int, Rp: np.ndarray, tp: np.ndarray, points: bool = False):
        """Distance [m] of slot ``s`` at one pose given by the parts' world rotations ``Rp`` (parts x 3 x 3) and
        translations ``tp`` (parts x 3); with ``points`` also the nearest points (robot part first)."""
        import coal

        a = int(self.slot_a[s])
        Ta = coal.Transform3s(Rp[a], tp[a])
        if self.slot_self[s]:
            b = int(self.slot_b[s])
            Tb = coal.Transform3s(Rp[b], tp[b])
        else:
            Tb = self.bodies[self.slot_b[s]].transform
        self._res.clear()
        d = float(self._functors[s](Ta, Tb, self._req, self._res))
        if d > 0.0 and self._enclosing[s] and enclosed(self._shapes[s], (Ta, Tb), self._res):
            d = -d  # one shape inside the other, d below the outer surface: they overlap
        if not points:
            return d
        return d, np.vstack((np.array(self._res.getNearestPoint1()), np.array(self._res.getNearestPoint2())))

    def placements_of(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Parts' world rotations and translations of one configuration (Pinocchio's forward kinematics)."""
        pin.forwardKinematics(self._model, self._data, q)
        Rs = np.array([M.rotation for M in self._data.oMi])[None]
        ps = np.array([M.translation for M in self._data.oMi])[None]
        Rp, tp = self.geometry.part_placements(Rs, ps)
        return Rp[0], tp[0]

    # ------------------------------------------------------------------ one batch of states
    def sweep(self, states: Sequence[Sequence[StopPrediction]]) -> list[StateClearance]:
        """The clearances of each state's stops (every case), see the module docstring. The broad phase runs on a
        coarse subset of each stop's samples (the fastest slot moves by at most ``coarse_step`` between them);
        the search splits coarse intervals at the samples between, then by cubic Hermite poses."""
        stops = []
        for n, preds in enumerate(states):
            for c, p in enumerate(preds):
                stops.append((n, c, *_distinct_samples(p)))
        sizes = [len(s[2]) for s in stops]
        Q = np.concatenate([s[3] for s in stops], axis=0)
        Rs, ps = self.geometry.joint_poses(Q)
        Rp, tp = self.geometry.part_placements(Rs, ps)
        offsets = np.concatenate(([0], np.cumsum(sizes)))
        items = []
        coarse_rows = []
        for k, s in enumerate(stops):
            lo, hi = offsets[k], offsets[k + 1]
            st = _Stop(s[1], *s[2:], Rp[lo:hi], tp[lo:hi])
            dq = _joint_displacements(st)
            st.Dcum = np.vstack((np.zeros((1, self.n_slots)), np.cumsum(dq @ self.weights.T, axis=0)))
            st.coarse = _coarse_indices(st.Dcum.max(axis=1) if self.n_slots else np.zeros(len(st.t)),
                                        self.settings.coarse_step)
            coarse_rows.append(lo + st.coarse)
            items.append(st)
        rows = np.concatenate(coarse_rows)
        lb = self.pose_bounds(Rs[rows], ps[rows])
        tcp_points = None
        if self.tcp is not None:
            j, _, pf = self.tcp
            tcp_points = ps[:, j] + Rs[:, j] @ pf
        at = 0
        for k, st in enumerate(items):
            st.lb = lb[at:at + len(st.coarse)]
            at += len(st.coarse)
            if tcp_points is not None:
                st.tcp = tcp_points[offsets[k]:offsets[k + 1]]
        per_state: list[list[_Stop]] = [[] for _ in states]
        for k, s in enumerate(stops):
            per_state[s[0]].append(items[k])
        scene_slots = np.flatnonzero(~self.slot_self)
        self_slots = np.flatnonzero(self.slot_self)
        out = []
        for group in per_state:
            scene = self._search(group, scene_slots, self.settings.margin) if len(scene_slots) else NO_CLEARANCE
            own = self._search(group, self_slots, self.settings.self_margin) if len(self_slots) else NO_CLEARANCE
            tcp = max(float(np.linalg.norm(st.tcp[-1] - st.tcp[0])) for st in group) if self.tcp else math.nan
            out.append(StateClearance(scene, own, tcp))
        return out

    def _search(self, stops: list["_Stop"], slots: np.ndarray, margin: float) -> Clearance:
        """Branch and bound over (case, coarse interval, slot) for the smallest distance of ``slots``."""
        def res(value: float) -> float:
            return self.settings.resolution(value, margin)

        cand_L, cand_ref = [], []
        for i, st in enumerate(stops):
            lb = st.lb[:, slots]
            if len(st.coarse) > 1:
                D = st.Dcum[st.coarse[1:]][:, slots] - st.Dcum[st.coarse[:-1]][:, slots]
                L = interval_bound(lb[:-1], lb[1:], D)
            else:
                L = lb
            cand_L.append(L.ravel())
            cand_ref.append(np.full(L.size, i))
        L_all = np.concatenate(cand_L)
        ref_all = np.concatenate(cand_ref)
        local = np.concatenate([np.arange(x.size) for x in cand_L])
        n_slots = len(slots)
        best = _Best()
        cache: dict = {}
        heap: list = []

        def evaluate(i: int, pose: int, s: int) -> float:
            key = (i, pose, s)
            d = cache.get(key)
            if d is None:
                st = stops[i]
                d = cache[key] = self.exact(s, st.Rp[pose], st.tp[pose])
                best.calls += 1
                if d < best.value:
                    best.set(d, i, s, float(st.t[pose]), st.q[pose])
            return d

        def push(i: int, s: int, i0: int, i1: int) -> None:
            """An interval between the samples i0 < i1 of stop i."""
            st = stops[i]
            da, db = evaluate(i, i0, s), evaluate(i, i1, s)
            D = float(st.Dcum[i1, s] - st.Dcum[i0, s])
            bound = max(0.5 * (da + db - D), max(da, db) - D)
            if bound < best.value - res(best.value) and D > 1e-12:
                heapq.heappush(heap, (bound, next(counter), i, s, i0, i1, da, db, D, None))

        counter = iter(range(1 << 62))

        def push_candidate(flat_index: int) -> None:
            i = int(ref_all[flat_index])
            k, column = divmod(int(local[flat_index]), n_slots)
            st = stops[i]
            s = int(slots[column])
            if len(st.coarse) == 1:
                evaluate(i, 0, s)
            else:
                push(i, s, int(st.coarse[k]), int(st.coarse[k + 1]))

        push_candidate(int(np.argmin(L_all)))
        idx = np.flatnonzero(L_all < best.value - res(best.value))
        order = idx[np.argsort(L_all[idx], kind="stable")]
        pos, unresolved = 0, 0.0
        while True:
            eps = res(best.value)
            next_sorted = L_all[order[pos]] if pos < len(order) else math.inf
            next_heap = heap[0][0] if heap else math.inf
            if min(next_sorted, next_heap) >= best.value - eps:
                break
            if best.calls > MAX_REFINEMENTS:  # report the resolution reached, not the one asked for
                unresolved = best.value - min(next_sorted, next_heap)
                break
            if next_sorted <= next_heap:
                push_candidate(int(order[pos]))
                pos += 1
                continue
            bound, _, i, s, i0, i1, da, db, D, ends = heapq.heappop(heap)
            if bound >= best.value - eps:
                continue
            if ends is None and i1 - i0 >= 2:
                mid = (i0 + i1) // 2
                push(i, s, i0, mid)
                push(i, s, mid, i1)
            else:
                self._split_hermite(stops[i], i, s, i0, i1, da, db, ends, heap, best, res, counter)
        points = self.exact(best.slot, *self.placements_of(best.q), points=True)[1]
        return Clearance(best.value, max(res(best.value), unresolved), int(stops[best.stop].case), best.time,
                         self.slot_names(best.slot), points, best.q, best.calls)

    def _split_hermite(self, st: "_Stop", i: int, s: int, i0: int, i1: int, d0: float, d1: float, ends,
                       heap: list, best: "_Best", res, counter) -> None:
        """Halve an interval inside one engine step: the pose in the middle from the cubic Hermite polynomial."""
        if ends is None:
            ends = ((st.t[i0], st.q[i0], st.v_right[i0], st.a_right[i0]),
                    (st.t[i1], st.q[i1], st.v_left[i1], st.a_left[i1]))
        (t0, q0, v0, a0), (t1, q1, v1, a1) = ends
        h = t1 - t0
        tm = 0.5 * (t0 + t1)
        qm = 0.5 * (q0 + q1) + 0.125 * h * (v0 - v1)
        vm = 1.5 * (q1 - q0) / h - 0.25 * (v0 + v1)
        am = 0.5 * (a0 + a1)
        dm = self.exact(s, *self.placements_of(qm))
        best.calls += 1
        if dm < best.value:
            best.set(dm, i, s, tm, qm)
        W = self.weights[s]
        middle = (tm, qm, vm, am)
        for (ea, eb, da, db) in (((t0, q0, v0, a0), middle, d0, dm), (middle, (t1, q1, v1, a1), dm, d1)):
            hh = eb[0] - ea[0]
            A = np.maximum(np.abs(ea[3]), np.abs(eb[3]))
            Dc = float(W @ (0.5 * hh * (np.abs(ea[2]) + np.abs(eb[2]) + A * hh)))
            b = max(0.5 * (da + db - Dc), max(da, db) - Dc)
            if b < best.value - res(best.value):
                heapq.heappush(heap, (b, next(counter), i, s, i0, i1, da, db, Dc, (ea, eb)))


class _Best:
    """The smallest exact distance found so far in one search and where."""

    __slots__ = ("value", "stop", "slot", "time", "q", "calls")

    def __init__(self) -> None:
        self.value, self.stop, self.slot, self.time, self.q, self.calls = math.inf, -1, -1, math.nan, None, 0

    def set(self, value: float, stop: int, slot: int, time: float, q: np.ndarray) -> None:
        self.value, self.stop, self.slot, self.time, self.q = value, stop, slot, time, q


@dataclass
class _Stop:
    case: int
    t: np.ndarray
    q: np.ndarray
    v_left: np.ndarray
    v_right: np.ndarray
    a_left: np.ndarray
    a_right: np.ndarray
    Rp: np.ndarray
    tp: np.ndarray
    lb: np.ndarray | None = None
    tcp: np.ndarray | None = None
    Dcum: np.ndarray | None = None
    coarse: np.ndarray | None = None


def _distinct_samples(p: StopPrediction) -> tuple[np.ndarray, ...]:
    """The prediction's samples once per instant (an event's two samples become one pose): t, q, and the
    velocity and acceleration as the end of the interval before (``left``: the first sample of the instant) and
    as the start of the interval after (``right``: the last sample of the instant)."""
    t = np.asarray(p.t, dtype=float)
    last = np.r_[np.diff(t) > 0.0, True]
    first = np.r_[True, np.diff(t) > 0.0]
    q, v, a = np.asarray(p.q), np.asarray(p.v), np.asarray(p.a)
    return t[last], q[last], v[first], v[last], a[first], a[last]


def _joint_displacements(st: _Stop) -> np.ndarray:
    """Per interval (I x nv), the bound of each joint's travel |dq_j| (module docstring)."""
    if len(st.t) < 2:
        return np.zeros((0, st.q.shape[1]))
    h = np.diff(st.t)[:, None]
    A = np.maximum(np.abs(st.a_right[:-1]), np.abs(st.a_left[1:]))
    return 0.5 * h * (np.abs(st.v_right[:-1]) + np.abs(st.v_left[1:]) + A * h)


def _coarse_indices(travel: np.ndarray, step: float) -> np.ndarray:
    """Sample indices (first and last included) such that ``travel`` (cumulative, non-decreasing) grows by about
    ``step`` between consecutive ones (every sample where it crosses a multiple of ``step``)."""
    if len(travel) <= 2:
        return np.arange(len(travel))
    bucket = np.floor(travel / step)
    keep = np.r_[True, bucket[1:] != bucket[:-1]]
    keep[-1] = True
    return np.flatnonzero(keep)


def interval_bound(lb0: np.ndarray, lb1: np.ndarray, D: np.ndarray) -> np.ndarray:
    """The interval bound L of the module docstring, elementwise."""
    return np.maximum(0.5 * (lb0 + lb1 - D), np.maximum(lb0, lb1) - D)
