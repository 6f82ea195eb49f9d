"""Worst cases and exact percentiles of a workspace stopping map, computed from its rows a block at a time.

A map's rows are given as *passes*: a callable that returns a fresh iterable of blocks (dicts of equally long
columns, the rows in state order), so a map of any size is reduced holding one block and a few small arrays:

* counts and the worst distance and time: one pass, a running maximum (the first row of the largest value wins,
  as with ``numpy.argmax`` over all rows);
* the percentiles (numpy's linear interpolation between order statistics, an inf reached by the interpolation
  stays inf): each order statistic they need is found exactly by a radix selection on the bit pattern of the
  float64 values (ordered as unsigned integers after the usual sign flip), :data:`DIGIT_BITS` bits per pass; once
  the values left with the statistic's leading bits are at most :data:`COLLECT` they are gathered and sorted.
  Memory: a 2^12-bin histogram per statistic sought and at most :data:`COLLECT` values per statistic (8 bytes
  each), whatever the number of rows; 2 to 7 passes over the two columns (3 or 4 for a map of 10^6 to 10^7
  states whose distances spread over a few powers of two).

Units: the distances in m, the times in s, as in the map's rows (:mod:`.workspace_map`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from vtm_dynamics.core.estop import StopInputError

Block = Mapping[str, np.ndarray]
Passes = Callable[[], Iterable[Block]]
PERCENTILES = (50, 90, 99, 100)
DIGIT_BITS = 12  # bits of the key fixed per pass (a histogram of 4096 counts, 32 kB, per statistic sought)
COLLECT = 1 << 14  # values gathered and sorted per order statistic once its candidates are this few
_SIGN = np.uint64(1 << 63)


@dataclass(frozen=True)
class MapSummary:
    """Reduction of a map: ``count`` states, ``stopped`` of them came to rest, ``past_limits`` of them carried a
    joint past its position limit (column ``within_limits`` false: not a stop the robot can make, counted like a
    state that did not stop); ``worst_distance`` / ``worst_time`` (the row's state number and value [m] / [s];
    both inf when a state did not stop or went past a limit: its stopping distance is not known); distribution percentiles (50, 90, 99, 100) ``distance_percentiles`` [m] and
    ``time_percentiles`` [s] (over every row, a state that did not stop counting as inf in both:
    :func:`summarize_passes`)."""

    count: int
    stopped: int
    worst_distance_state: int
    worst_distance: float
    worst_time_state: int
    worst_time: float
    distance_percentiles: tuple[float, float, float, float]
    time_percentiles: tuple[float, float, float, float]
    past_limits: int = 0


def passes_of(columns: Block) -> Passes:
    """The passes over a map held whole in memory (one block)."""
    return lambda: (columns,)


def known_stops(block: Block) -> np.ndarray:
    """Per row, whether its distance and time are a stop the robot can make: it came to rest (``stopped``) and no
    joint went past its limit (``within_limits``)."""
    return np.asarray(block["stopped"], dtype=bool) & np.asarray(block["within_limits"], dtype=bool)


def ranked_values(block: Block) -> tuple[np.ndarray, np.ndarray]:
    """The distance [m] and time [s] of each row as the percentiles rank them: inf for a state that did not stop
    or went past a joint limit (its stopping distance and time are not known: :func:`known_stops`) and for a
    distance or time that is not a number."""
    dist = np.asarray(block["tcp_straight_distance_m"], dtype=float)
    time = np.asarray(block["stop_time_s"], dtype=float)
    stopped = known_stops(block)
    return (np.where(stopped & np.isfinite(dist), dist, math.inf),
            np.where(stopped & ~np.isnan(time), time, math.inf))


# ------------------------------------------------------------------------------------------------ order statistics
def _keys(x: np.ndarray) -> np.ndarray:
    """uint64 keys whose unsigned order is the order of the float64 values (not nan)."""
    bits = np.ascontiguousarray(x, dtype=np.float64).view(np.uint64)
    return np.where(bits & _SIGN, ~bits, bits | _SIGN)


def _value(key: int) -> float:
    key = np.uint64(key)
    bits = key & ~_SIGN if key & _SIGN else ~key
    return float(np.array([bits], dtype=np.uint64).view(np.float64)[0])


def order_statistics(passes: Callable[[], Iterable[Sequence[np.ndarray]]],
                     ranks: Sequence[Sequence[int]]) -> list[dict[int, float]]:
    """Exact order statistics of several series read together: ``passes()`` yields, per block, one array per
    series; ``ranks[s]`` are the 0-based ranks wanted of series ``s`` (each below its length). Returns per series
    {rank: value}: the value at that rank after sorting the whole series (radix selection, module docstring)."""
    # a request: series, rank, the number of leading bits fixed, their value, rank among those candidates, count;
    # requests with the same series and leading bits share one histogram or one gathering
    todo = [(s, r, 0, 0, r, None) for s, rs in enumerate(ranks) for r in sorted(set(rs))]
    found: list[dict[int, float]] = [{} for _ in ranks]
    while todo:
        groups = sorted({(s, fixed, prefix, count is not None and count <= COLLECT)
                         for s, _, fixed, prefix, _, count in todo})
        hist = {g: np.zeros(1 << min(DIGIT_BITS, 64 - g[1]), dtype=np.int64) for g in groups if not g[3]}
        picked: dict[tuple, list[np.ndarray]] = {g: [] for g in groups if g[3]}
        for block in passes():
            keys = [_keys(x) for x in block]
            for g in groups:
                s, fixed, prefix, gather = g
                k = keys[s] if fixed == 0 else keys[s][(keys[s] >> np.uint64(64 - fixed)) == np.uint64(prefix)]
                if gather:
                    picked[g].append(k)
                else:
                    bits = min(DIGIT_BITS, 64 - fixed)
                    digit = (k >> np.uint64(64 - fixed - bits)) & np.uint64((1 << bits) - 1)
                    hist[g] += np.bincount(digit.astype(np.intp), minlength=1 << bits)
        sorted_picked = {g: np.sort(np.concatenate(v)) for g, v in picked.items()}
        left = []
        for s, r, fixed, prefix, within, count in todo:
            g = (s, fixed, prefix, count is not None and count <= COLLECT)
            if g[3]:
                found[s][r] = _value(int(sorted_picked[g][within]))
                continue
            cum = np.cumsum(hist[g])
            digit = int(np.searchsorted(cum, within, side="right"))
            within -= int(cum[digit - 1]) if digit else 0
            bits = min(DIGIT_BITS, 64 - fixed)
            if fixed + bits == 64:  # every bit fixed: the candidates all hold this value
                found[s][r] = _value((prefix << bits) | digit)
            else:
                left.append((s, r, fixed + bits, (prefix << bits) | digit, within, int(hist[g][digit])))
        todo = left
    return found


def percentiles_of(order: dict[int, float], n: int, pct: Sequence[float] = PERCENTILES) -> tuple[float, ...]:
    """numpy's linear percentiles of ``n`` values from their order statistics ``order`` (:func:`percentile_ranks`);
    a percentile whose interpolation reaches an infinite value is inf (never nan)."""
    out = []
    for p in pct:
        h = (n - 1) * p / 100.0
        lo, hi = int(math.floor(h)), int(math.ceil(h))
        out.append(math.inf if math.isinf(order[hi]) else float(order[lo] + (h - lo) * (order[hi] - order[lo])))
    return tuple(out)


def percentile_ranks(n: int, pct: Sequence[float] = PERCENTILES) -> list[int]:
    """The 0-based ranks whose values :func:`percentiles_of` interpolates between."""
    return sorted({f((n - 1) * p / 100.0) for p in pct for f in (math.floor, math.ceil)})


# ------------------------------------------------------------------------------------------------ the summary
def summarize_passes(passes: Passes) -> MapSummary:
    """Worst cases and distribution of a map's rows (columns ``state``, ``tcp_straight_distance_m``,
    ``stop_time_s``, ``stopped``, ``within_limits``), read a block at a time. A state that did not stop has the
    stop time inf and an unknown stopping distance (its row keeps the distance at the horizon, a lower bound while
    it is still moving): both count as inf. So do the distance and time of a state that went past a joint limit
    (the end stop, not the brake, would end that motion); it counts among the states that did not stop below. Such a state is the worst time and the worst distance (of several, the one farthest from its
    start at the horizon), and it takes part in the percentiles as inf, so a percentile whose rank reaches the
    states that did not stop is inf, and the maxima are inf when any did not stop. A distance or time that is not
    a number counts as unknown (inf) too: no row is left out of a percentile."""
    count = stopped = past_limits = 0
    known_worst = unknown_worst = time_worst = None  # (value, state)
    for block in passes():
        dist = np.asarray(block["tcp_straight_distance_m"], dtype=float)
        if dist.size == 0:
            continue
        states = np.asarray(block["state"])
        ranked_dist, time = ranked_values(block)
        unknown = np.flatnonzero(np.isinf(ranked_dist))
        count += int(dist.size)
        stopped += int(np.sum(np.asarray(block["stopped"], dtype=bool)))
        past_limits += int(np.sum(~np.asarray(block["within_limits"], dtype=bool)))
        if unknown.size:  # the farthest at the horizon among the states whose stopping distance is not known
            far = np.where(np.isfinite(dist[unknown]), dist[unknown], -np.inf)
            j = int(np.argmax(far))
            if unknown_worst is None or far[j] > unknown_worst[0]:
                unknown_worst = (float(far[j]), int(states[unknown[j]]))
        elif known_worst is None or np.max(dist) > known_worst[0]:
            j = int(np.argmax(dist))
            known_worst = (float(dist[j]), int(states[j]))
        j = int(np.argmax(time))
        if time_worst is None or time[j] > time_worst[0]:
            time_worst = (float(time[j]), int(states[j]))
    if count == 0:
        raise StopInputError("map: no rows to summarize")
    ranks = percentile_ranks(count)
    order = order_statistics(lambda: (ranked_values(b) for b in passes()), [ranks, ranks])
    worst_distance = (math.inf, unknown_worst[1]) if unknown_worst is not None else known_worst
    return MapSummary(count=count, stopped=stopped, worst_distance_state=worst_distance[1],
                      worst_distance=worst_distance[0], worst_time_state=time_worst[1], worst_time=time_worst[0],
                      distance_percentiles=percentiles_of(order[0], count),
                      time_percentiles=percentiles_of(order[1], count), past_limits=past_limits)
