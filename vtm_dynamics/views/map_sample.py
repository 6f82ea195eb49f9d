"""What the view of a workspace stopping map draws, gathered from the map's rows a block at a time.

A map can have 10^6 - 10^7 rows (:mod:`vtm_dynamics.core.stopping.workspace_map`); its view draws at most
``max_points`` TCP start positions and replays its worst few states. :func:`sample_map` finds them without holding
the map: the rows are given by a :data:`Reader` (the columns asked for, as passes of blocks in row order, see
:data:`vtm_dynamics.core.stopping.map_summary.Passes`) and read

1. once for the counts, the worst rows (a running top ``count``), the largest distance and the longest stop;
2. once (every column) for the drawn rows and every column of the worst rows. Which rows are drawn is decided
   before this pass from the number of drawable rows and the seed alone: the worst drawable rows, and of the other
   drawable rows those at the positions ``numpy.random.default_rng(seed).choice(n_rest, max_points - n_worst,
   replace=False)`` draws - the rows a draw from the whole list of them picks, so the picture does not depend on
   how the map is read;
3. two to seven times (the distance column alone) for the percentiles of the info panel
   (:func:`vtm_dynamics.core.stopping.map_summary.order_statistics`).

Memory: a block of rows, ``max_points`` drawn positions and distances, the worst rows, and the draw itself (numpy
shuffles an index of the drawable rows when there are fewer than 50 x ``max_points`` of them: 8 bytes a row, at
most 8 MB for the default 20,000 points; beyond, it keeps only the drawn positions). Units: m, s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from vtm_dynamics.core.stopping.map_summary import Passes, known_stops, order_statistics, passes_of, \
    percentile_ranks, percentiles_of, ranked_values

Reader = Callable[[Sequence[str] | None], Passes]  # the columns asked for (None: every column) -> passes over them
MAX_MAP_POINTS = 20000  # drawn start positions; the rest of a larger map is thinned (seeded), the worst kept
INFO_PERCENTILES = (50, 90, 99)
DISTANCE = "tcp_straight_distance_m"
START = ("tcp_x_m", "tcp_y_m", "tcp_z_m")
FIRST_PASS = ("state", DISTANCE, "stop_time_s", "stopped", "within_limits") + START


@dataclass(frozen=True)
class MapSample:
    """The view's share of a map of ``count`` rows: the drawn rows' numbers ``rows`` (0-based, in file order), their
    TCP start positions ``start`` [m] (k x 3), stopping distances ``distance`` [m] and whether they stopped within
    the horizon and within the joint limits ``stopped`` (the distance of a row that did not is how far it had moved
    by then, or went without end stops: not its stopping distance); ``top`` the largest finite distance of the rows that stopped [m] (1 when there is none); ``worst``
    every column of the worst rows, worst first, and ``worst_rows`` their row numbers (:func:`worst_order`: the
    rows that did not stop first); ``info`` the lines of the info panel; ``past_limit``: whether each drawn row
    came to rest past a joint limit (no end stops in the model; drawn apart from the rows that did not stop)."""

    count: int
    rows: np.ndarray
    start: np.ndarray
    distance: np.ndarray
    stopped: np.ndarray
    top: float
    worst: dict[str, np.ndarray]
    worst_rows: tuple[int, ...]
    info: tuple[str, ...]
    past_limit: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool))


def columns_reader(columns: Mapping[str, np.ndarray]) -> Reader:
    """A :data:`Reader` of a map held whole in memory (one block)."""
    return lambda names: passes_of(dict(columns) if names is None else {k: columns[k] for k in names})


def worst_order(distance: np.ndarray, stopped: np.ndarray | None = None) -> np.ndarray:
    """Sort keys of rows by stopping distance [m]: rows that did not stop within the horizon first (their stopping
    distance is not known, as in the map's summary), then the largest distance first, rows without a finite
    distance last; among equal keys the earlier row comes first (a stable sort of the keys)."""
    d = np.asarray(distance, dtype=float)
    keys = np.where(np.isfinite(d), -d, np.inf)
    return keys if stopped is None else np.where(np.asarray(stopped, dtype=bool), keys, -np.inf)


@dataclass
class _Tally:
    """The first pass's running results; the running top ``count`` rows as their sort keys (:func:`worst_order`),
    row numbers and whether their start position is finite."""

    count: int = 0
    drawable: int = 0
    stopped: int = 0
    past_limits: int = 0
    finite: int = 0
    top: tuple[float, int] | None = None  # (distance, state): the first stopped row of the largest finite distance
    longest: tuple[float, int] | None = None  # (stop time, state): the first stopped row of the longest stop
    worst_keys: np.ndarray = field(default_factory=lambda: np.empty(0))
    worst_rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    worst_drawable: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool))


def _first_pass(read: Reader, count: int) -> _Tally:
    tally = _Tally()
    for block in read(FIRST_PASS)():
        d = np.asarray(block[DISTANCE], dtype=float)
        t = np.asarray(block["stop_time_s"], dtype=float)
        stopped = known_stops(block)  # at rest and within the joint limits
        states = np.asarray(block["state"])
        drawable = np.all(np.isfinite(np.column_stack([np.asarray(block[c], dtype=float) for c in START])), axis=1)
        rows = tally.count + np.arange(len(d), dtype=np.int64)
        # the running top `count`: the candidates so far (earlier rows) before this block's, sorted stably
        keys = np.concatenate([tally.worst_keys, worst_order(d, stopped)])
        order = np.argsort(keys, kind="stable")[:count]
        tally.worst_keys = keys[order]
        tally.worst_rows = np.concatenate([tally.worst_rows, rows])[order]
        tally.worst_drawable = np.concatenate([tally.worst_drawable, drawable])[order]
        finite = np.isfinite(d) & stopped
        if finite.any():
            j = int(np.argmax(np.where(finite, d, -np.inf)))
            if tally.top is None or d[j] > tally.top[0]:
                tally.top = (float(d[j]), int(states[j]))
        timed = np.isfinite(t) & stopped
        if timed.any():
            j = int(np.argmax(np.where(timed, t, -np.inf)))
            if tally.longest is None or t[j] > tally.longest[0]:
                tally.longest = (float(t[j]), int(states[j]))
        tally.count += len(d)
        tally.drawable += int(np.sum(drawable))
        tally.stopped += int(np.sum(np.asarray(block["stopped"], dtype=bool)))
        tally.past_limits += int(np.sum(~np.asarray(block["within_limits"], dtype=bool)))
        tally.finite += int(np.sum(finite))
    return tally


def sample_map(read: Reader, count: int = 3, max_points: int = MAX_MAP_POINTS, seed: int = 0) -> MapSample:
    """The drawn rows, the worst ``count`` rows and the info panel of the map ``read`` gives (module docstring)."""
    tally = _first_pass(read, count)
    must = np.sort(tally.worst_rows[tally.worst_drawable])
    thin = tally.drawable > max_points
    # positions among the drawable rows that are not among the worst, in file order
    picked = (np.sort(np.random.default_rng(seed).choice(tally.drawable - len(must), max_points - len(must),
                                                         replace=False)) if thin else None)
    rows, start, distance, stopped, past, worst = [], [], [], [], [], []
    seen = rest_seen = 0
    for block in read(None)():
        d = np.asarray(block[DISTANCE], dtype=float)
        xyz = np.column_stack([np.asarray(block[c], dtype=float) for c in START])
        here = seen + np.arange(len(d), dtype=np.int64)
        drawable = np.all(np.isfinite(xyz), axis=1)
        keep = drawable
        if thin:
            is_must = np.isin(here, must)
            rest = drawable & ~is_must
            rank = rest_seen + np.cumsum(rest) - 1  # position among the rest, valid where `rest`
            chosen = rest & np.isin(rank, picked[(picked >= rest_seen) & (picked < rest_seen + rest.sum())])
            keep = (drawable & is_must) | chosen
            rest_seen += int(rest.sum())
        rows.append(here[keep])
        start.append(xyz[keep])
        distance.append(d[keep])
        stopped.append(known_stops(block)[keep])
        past.append((np.asarray(block["stopped"], dtype=bool) & ~np.asarray(block["within_limits"], dtype=bool))[keep])
        mine = np.isin(here, tally.worst_rows)
        if mine.any():
            worst.append({name: np.asarray(values)[mine] for name, values in block.items()} | {"": here[mine]})
        seen += len(d)
    worst_columns = _worst_first(worst, tally.worst_rows)
    top = tally.top[0] if tally.top is not None else 1.0
    return MapSample(count=tally.count, rows=np.concatenate(rows) if rows else np.empty(0, dtype=np.int64),
                     start=np.concatenate(start) if start else np.empty((0, 3)),
                     distance=np.concatenate(distance) if distance else np.empty(0),
                     stopped=np.concatenate(stopped) if stopped else np.empty(0, dtype=bool), top=top,
                     worst=worst_columns, worst_rows=tuple(int(r) for r in tally.worst_rows),
                     info=tuple(_info(read, tally)),
                     past_limit=np.concatenate(past) if past else np.empty(0, dtype=bool))


def _worst_first(parts: list[dict[str, np.ndarray]], order: np.ndarray) -> dict[str, np.ndarray]:
    """Every column of the worst rows gathered from ``parts`` (row numbers under the key ""), in ``order``."""
    if not parts:
        return {}
    joined = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    at = {int(r): k for k, r in enumerate(joined.pop(""))}
    pick = np.array([at[int(r)] for r in order], dtype=np.int64)
    return {name: values[pick] for name, values in joined.items()}


def _info(read: Reader, tally: _Tally) -> list[str]:
    """The info panel: counts, the largest known distance and the longest stop, and the percentiles of the
    distances as the map's summary gives them (every row; a row that did not stop, or without a distance, counts
    as unknown: :func:`~vtm_dynamics.core.stopping.map_summary.ranked_values`; numpy's linear percentiles, exact
    order statistics)."""
    n = tally.count
    out = [f"{n} states, {tally.stopped} stopped within the horizon"]
    if n > tally.stopped:
        out.append(f"{n - tally.stopped} states did not stop within the horizon: their stopping distance is not "
                   "known (drawn apart, first among the worst)")
    if tally.past_limits:
        out.append(f"{tally.past_limits} states went past a joint limit (no end stops in the model): their distance "
                   "is not a stopping distance (drawn apart, first among the worst)")
    if tally.top is not None:
        ranks = percentile_ranks(n, INFO_PERCENTILES)
        order = order_statistics(lambda: ((ranked_values(b)[0],) for b in read(FIRST_PASS)()), [ranks])[0]
        unknown = "not known" if tally.past_limits else "not stopped"  # a state past a limit did stop
        pct = [unknown if math.isinf(x) else f"{x:.4f}" for x in percentiles_of(order, n, INFO_PERCENTILES)]
        out.append(f"worst TCP distance {tally.top[0]:.4f} m (state {tally.top[1]}); p50/p90/p99: "
                   + " / ".join(pct) + (" m" if pct[-1] != unknown else ""))
    if tally.longest is not None:
        t, state = tally.longest
        why = f"not stopped ({n - tally.stopped} states)" if not tally.past_limits else \
            f"not known ({n - tally.stopped} not stopped, {tally.past_limits} past a joint limit)"
        out.append(f"worst stop time {t:.4f} s (state {state})" if tally.stopped == n and not tally.past_limits else
                   f"worst stop time: {why}; longest stop {t:.4f} s (state {state})")
    return out
