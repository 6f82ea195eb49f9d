"""ISO 13855:2010 minimum distances, S = K T + C, for each device rule; the expected values are worked by hand
from the rules quoted in the module docstring (T split over the three times)."""

import pytest

from vtm_dynamics.core.stopsafe.iso13855 import (
    SafeguardError, Safeguard, intrusion_from_detection_capability, minimum_distance,
)


@pytest.mark.parametrize("device, T, S, K, C", [
    (Safeguard("light_curtain", 14.0), 0.100, 200.0, 2000.0, 0.0),   # 2000 x 0.1 + 8 (14 - 14)
    (Safeguard("light_curtain", 30.0), 0.300, 608.0, 1600.0, 128.0),  # 2000 x 0.3 + 128 = 728 > 500: 1600 x 0.3 + 128
    (Safeguard("light_curtain", 14.0), 0.020, 100.0, 2000.0, 0.0),   # 40 mm raised to the 100 mm minimum
    (Safeguard("light_curtain", 14.0), 0.300, 500.0, 1600.0, 0.0),   # 600 > 500, 480 < 500: 500
    (Safeguard("light_curtain", 10.0), 0.100, 200.0, 2000.0, 0.0),   # 8 (10 - 14) < 0: C = 0
    (Safeguard("light_curtain", 50.0), 0.200, 1170.0, 1600.0, 850.0),
    (Safeguard("multi_beam", beams=3), 0.200, 1170.0, 1600.0, 850.0),
    (Safeguard("single_beam"), 0.200, 1520.0, 1600.0, 1200.0),
    (Safeguard("parallel", 70.0, height=300.0), 0.200, 1400.0, 1600.0, 1080.0),  # C = 1200 - 0.4 x 300
    (Safeguard("parallel", 30.0, height=1000.0), 0.100, 1010.0, 1600.0, 850.0),  # 1200 - 400 < 850: 850
    (Safeguard("pressure_mat"), 0.200, 1520.0, 1600.0, 1200.0),
    (Safeguard("pressure_mat", height=100.0), 0.200, 1480.0, 1600.0, 1160.0),
])
def test_minimum_distance_by_device_rule(device, T, S, K, C):
    r = minimum_distance(device, 0.2 * T, 0.3 * T, 0.5 * T, "predicted")
    assert (r.S, r.K, r.C) == (pytest.approx(S), pytest.approx(K), pytest.approx(C))
    assert r.T == pytest.approx(T)
    terms = {t.symbol: t for t in r.terms}
    assert terms["ts"].source == "predicted" and terms["S"].value == pytest.approx(S)
    assert any("6.5" in n for n in r.notes)  # reaching over is named as not checked


@pytest.mark.parametrize("device, words", [
    (Safeguard("light_curtain", 80.0), "above 70 mm: use multi_beam or single_beam"),
    (Safeguard("light_curtain"), "detection_capability: a number in mm is required"),
    (Safeguard("multi_beam", beams=5), "2, 3 or 4 beams"),
    (Safeguard("parallel", 70.0, height=200.0), "below 15 (d - 50) = 300 mm"),
    (Safeguard("fence"), "device: expected one of"),
])
def test_bad_devices_are_one_line(device, words):
    with pytest.raises(SafeguardError) as err:
        minimum_distance(device, 0.01, 0.01, 0.1, "given")
    assert words in str(err.value)


def test_times_and_intrusion_rule():
    with pytest.raises(SafeguardError, match="stopping_time: expected 0..100 s"):
        minimum_distance(Safeguard("single_beam"), 0.01, 0.01, -0.1, "given")
    assert intrusion_from_detection_capability(30.0) == pytest.approx(128.0)
    assert intrusion_from_detection_capability(60.0) == pytest.approx(850.0)
