"""A map's summary read a block at a time is the summary of all its rows at once: the same counts, the same worst
states (the first of equal values), and percentiles exact to the bit - checked against numpy's sort and
percentiles over the whole series, which the block-wise selection never sees."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vtm_dynamics.core.stopping import map_summary
from vtm_dynamics.core.stopping.map_summary import order_statistics, summarize_passes


def _blocks(columns: dict[str, np.ndarray], size: int):
    n = len(next(iter(columns.values())))
    return lambda: ({k: v[i:i + size] for k, v in columns.items()} for i in range(0, n, size))


def _series(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "uniform":
        return rng.uniform(0.0, 0.5, n)
    if kind == "signed":
        return rng.normal(0.0, 3.0, n)
    if kind == "ties":  # many equal values: the selection ends with every bit fixed, nothing left to gather
        return rng.choice([0.0, 0.125, 0.25, 1.0], n)
    if kind == "neighbours":  # values a few ulps apart: only the last bits tell them apart
        return 1.0 + rng.integers(0, 50, n) * np.finfo(float).eps
    return np.where(rng.random(n) < 0.2, np.inf, rng.uniform(0.0, 0.3, n))  # "not stopped"


@pytest.mark.parametrize("kind", ["uniform", "signed", "ties", "neighbours", "inf"])
@pytest.mark.parametrize("collect", [4, 1 << 14])
def test_order_statistics_are_the_values_of_the_sorted_series(kind, collect, monkeypatch):
    # a tiny gathering limit makes every statistic go through several histogram passes
    monkeypatch.setattr(map_summary, "COLLECT", collect)
    rng = np.random.default_rng(7)
    n = 5003
    x, y = _series(kind, n, rng), rng.uniform(-1.0, 1.0, n)
    ranks = [0, 1, 2501, 4500, n - 2, n - 1]
    blocks = lambda: ((x[i:i + 700], y[i:i + 700]) for i in range(0, n, 700))
    found = order_statistics(blocks, [ranks, ranks[2:4]])
    sx, sy = np.sort(x), np.sort(y)
    assert found[0] == {r: sx[r] for r in ranks}
    assert found[1] == {r: sy[r] for r in ranks[2:4]}


def _map(n: int, rng: np.random.Generator, late: float) -> dict[str, np.ndarray]:
    stopped = rng.random(n) >= late
    return {"state": np.arange(100, 100 + n), "tcp_straight_distance_m": rng.uniform(0.0, 0.4, n),
            "stop_time_s": np.where(stopped, rng.uniform(0.05, 0.6, n), np.inf), "stopped": stopped,
            "within_limits": np.ones(n, bool)}


@pytest.mark.parametrize("late", [0.0, 0.004, 0.6])
def test_the_summary_of_blocks_is_the_summary_of_every_row(late):
    rng = np.random.default_rng(11)
    rows = _map(20_011, rng, late)
    s = summarize_passes(_blocks(rows, 997))
    d, t, stopped = rows["tcp_straight_distance_m"], rows["stop_time_s"], rows["stopped"]
    assert (s.count, s.stopped) == (d.size, int(stopped.sum()))
    # independent: numpy's linear percentiles over every row, a state that did not stop larger than any other
    big = 1e300
    for got, values in ((s.distance_percentiles, np.where(stopped, d, big)), (s.time_percentiles, t)):
        ref = np.percentile(np.where(np.isfinite(values), values, big), (50, 90, 99, 100))
        largest = np.max(values[values < big])
        assert got == pytest.approx([math.inf if r > largest else r for r in ref], rel=1e-12, abs=0.0)
    if stopped.all():
        assert (s.worst_distance, s.worst_distance_state) == (d.max(), 100 + int(np.argmax(d)))
        assert (s.worst_time, s.worst_time_state) == (t.max(), 100 + int(np.argmax(t)))
    else:  # the farthest at the horizon of the states that did not stop; the first of them for the time
        late_rows = np.flatnonzero(~stopped)
        assert s.worst_distance == math.inf and s.worst_time == math.inf
        assert s.worst_distance_state == 100 + int(late_rows[np.argmax(d[late_rows])])
        assert s.worst_time_state == 100 + int(late_rows[0])


def test_of_equal_worst_values_the_first_state_is_the_worst_whichever_block_it_is_in():
    d = np.array([0.1, 0.3, 0.2, 0.3, 0.3, 0.1])
    rows = {"state": np.arange(6), "tcp_straight_distance_m": d, "stop_time_s": d.copy(), "stopped": np.ones(6, bool),
            "within_limits": np.ones(6, bool)}
    for size in (1, 2, 4, 6):
        s = summarize_passes(_blocks(rows, size))
        assert (s.worst_distance_state, s.worst_time_state) == (1, 1), size


def test_blocks_with_no_rows_are_skipped_and_a_map_with_none_is_an_error():
    empty = {"state": np.arange(0), "tcp_straight_distance_m": np.empty(0), "stop_time_s": np.empty(0),
             "stopped": np.zeros(0, bool), "within_limits": np.zeros(0, bool)}
    one = {"state": np.array([4]), "tcp_straight_distance_m": np.array([0.2]), "stop_time_s": np.array([0.3]),
           "stopped": np.array([True]), "within_limits": np.array([True])}
    s = summarize_passes(lambda: (empty, one, empty))
    assert (s.count, s.worst_distance_state, s.distance_percentiles) == (1, 4, (0.2, 0.2, 0.2, 0.2))
    with pytest.raises(ValueError, match="no rows"):
        summarize_passes(lambda: (empty,))
