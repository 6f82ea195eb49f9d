"""ISO 13855 minimum distances of safeguards, with the machine's stopping time taken from predicted stops.

ISO 13855:2010 (Safety of machinery - Positioning of safeguards with respect to the approach speeds of parts of the
human body), Clause 5: S = K x T + C [mm], with K [mm/s] the approach speed, T [s] the overall system stopping
performance (here: the detection device's response time + the control system's response time + the robot's
stopping time, the last one PREDICTED: the worst case of the envelope, Müller 2026 eqs. (3) and (22) through
:mod:`vtm_dynamics.core.estop`) and C [mm] the intrusion distance. The rules implemented, by device type (our
reading of the 2010 edition; the 2024 edition restructures C into D_DS + Z and must be applied separately):

* ``light_curtain`` - ESPE, detection zone orthogonal to the approach (6.2), detection capability d [mm]:
  d <= 40: K = 2000, C = 8 (d - 14) but not below 0; S at least 100 mm; if S > 500 mm it is recomputed with
  K = 1600 and then not taken below 500 mm. 40 < d <= 70: K = 1600, C = 850 (body detection). d > 70 is not a
  light curtain for this rule (use ``multi_beam``/``single_beam``).
* ``multi_beam`` - multiple separate beams (2, 3 or 4 at the standard's beam heights, 6.2): K = 1600, C = 850.
* ``single_beam`` - one beam (6.2): K = 1600, C = 1200.
* ``parallel`` - ESPE whose detection zone is parallel to the approach, e.g. a horizontal laser-scanner field
  (6.3): K = 1600, C = 1200 - 0.4 H but not below 850, H [mm] the height of the detection zone above the reference
  plane, at most 1000 and at least 15 (d - 50) (and 0).
* ``pressure_mat`` - pressure-sensitive mats and floors (Clause 7): K = 1600, C = 1200; on a step of height H:
  C = 1200 - 0.4 H.

Not implemented: reaching over the detection zone (6.5, Table 1: the larger of the reach-through and reach-over
distances applies) and angled approaches (6.4); the report says so. Units: mm, mm/s, s as in the standard.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vtm_dynamics.core.estop.inputs import StopInputError

DEVICES = ("light_curtain", "multi_beam", "single_beam", "parallel", "pressure_mat")
MAX_TIME = 100.0  # [s] response and stopping times beyond this are unit errors


class SafeguardError(StopInputError):
    """A safeguard description the rules cannot take (one line naming the field)."""


@dataclass(frozen=True)
class Safeguard:
    """The device: ``kind`` (one of :data:`DEVICES`), ``detection_capability`` d [mm] (light curtains, parallel
    ESPE), ``beams`` (multi-beam: 2, 3 or 4), ``height`` H [mm] (parallel ESPE: detection zone above the reference
    plane; pressure mat: the step it lies on, 0 on the floor)."""

    kind: str
    detection_capability: float | None = None
    beams: int | None = None
    height: float | None = None


@dataclass(frozen=True)
class Term:
    """One line of the report: ``symbol``, ``value``, ``unit``, ``source`` (where the number comes from)."""

    symbol: str
    name: str
    value: float
    unit: str
    source: str


@dataclass(frozen=True)
class MinimumDistance:
    """S [mm] with every term: ``K`` [mm/s], ``T`` [s] (= ``detection_response`` + ``control_response`` +
    ``stopping_time``), ``C`` [mm], ``rule`` (clause and case applied), ``terms`` (the report table) and
    ``notes`` (limits applied, what was not checked)."""

    S: float
    K: float
    T: float
    C: float
    rule: str
    terms: tuple[Term, ...]
    notes: tuple[str, ...]


def _time(x: float, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or not 0 <= x <= MAX_TIME:
        raise SafeguardError(f"{name}: expected 0..{MAX_TIME:g} s, got {x!r}")
    return float(x)


def _mm(x: float | None, name: str, low: float, high: float) -> float:
    if x is None or isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise SafeguardError(f"{name}: a number in mm is required for this device")
    if not low <= x <= high:
        raise SafeguardError(f"{name}: expected {low:g}..{high:g} mm, got {x:g}")
    return float(x)


def minimum_distance(device: Safeguard, detection_response: float, control_response: float, stopping_time: float,
                     stopping_time_source: str) -> MinimumDistance:
    """ISO 13855 S = K T + C for ``device`` (rules in the module docstring); the times in s, the sources of the
    response times are "given", the stopping time's source is ``stopping_time_source``."""
    if device.kind not in DEVICES:
        raise SafeguardError(f"device: expected one of {', '.join(DEVICES)}, got {device.kind!r}")
    t1 = _time(detection_response, "detection_response")
    t2 = _time(control_response, "control_response")
    ts = _time(stopping_time, "stopping_time")
    T = t1 + t2 + ts
    notes = ["reaching over the detection zone (ISO 13855:2010, 6.5, Table 1) is not checked: the larger distance "
             "applies"]
    extra: list[Term] = []
    if device.kind == "light_curtain":
        d = _mm(device.detection_capability, "detection_capability", 1.0, 1000.0)
        extra.append(Term("d", "detection capability", d, "mm", "given"))
        if d <= 40:
            C = max(0.0, 8.0 * (d - 14.0))
            K = 2000.0
            S = K * T + C
            rule = "6.2, d <= 40 mm: K = 2000 mm/s, C = 8 (d - 14) mm"
            if S < 100.0:
                notes.append(f"S = {S:.1f} mm raised to the 100 mm minimum")
                S = 100.0
            elif S > 500.0:
                K = 1600.0
                S2 = K * T + C
                rule += "; S > 500 mm, so K = 1600 mm/s"
                if S2 < 500.0:
                    notes.append(f"S = {S2:.1f} mm with K = 1600 mm/s raised to the 500 mm minimum")
                    S2 = 500.0
                S = S2
        elif d <= 70:
            K, C = 1600.0, 850.0
            S = K * T + C
            rule = "6.2, 40 mm < d <= 70 mm: K = 1600 mm/s, C = 850 mm"
        else:
            raise SafeguardError(f"detection_capability: {d:g} mm is above 70 mm: use multi_beam or single_beam")
    elif device.kind == "multi_beam":
        if device.beams not in (2, 3, 4):
            raise SafeguardError("beams: a multi-beam device has 2, 3 or 4 beams (at the standard's heights)")
        extra.append(Term("n", "beams", float(device.beams), "", "given"))
        K, C = 1600.0, 850.0
        S = K * T + C
        rule = f"6.2, multiple separate beams ({device.beams}): K = 1600 mm/s, C = 850 mm"
    elif device.kind == "single_beam":
        K, C = 1600.0, 1200.0
        S = K * T + C
        rule = "6.2, single beam: K = 1600 mm/s, C = 1200 mm"
    elif device.kind == "parallel":
        d = _mm(device.detection_capability, "detection_capability", 1.0, 1000.0)
        H = _mm(device.height, "height", 0.0, 1000.0)
        h_min = max(0.0, 15.0 * (d - 50.0))
        if H < h_min:
            raise SafeguardError(f"height: {H:g} mm is below 15 (d - 50) = {h_min:g} mm for d = {d:g} mm")
        extra += [Term("d", "detection capability", d, "mm", "given"),
                  Term("H", "height of the detection zone", H, "mm", "given")]
        K = 1600.0
        C = max(850.0, 1200.0 - 0.4 * H)
        S = K * T + C
        rule = "6.3, parallel approach: K = 1600 mm/s, C = 1200 - 0.4 H mm, not below 850 mm"
    else:
        H = _mm(device.height if device.height is not None else 0.0, "height", 0.0, 1000.0)
        extra.append(Term("H", "height of the step under the mat", H, "mm", "given"))
        K, C = 1600.0, 1200.0 - 0.4 * H
        S = K * T + C
        rule = "Clause 7, pressure-sensitive mat: K = 1600 mm/s, C = 1200 - 0.4 H mm"
    terms = (
        Term("t1", "detection response time", t1, "s", "given (device data sheet)"),
        Term("t2", "control response time", t2, "s", "given (safety controller data sheet)"),
        Term("ts", "robot stopping time", ts, "s", stopping_time_source),
        Term("T", "overall stopping performance t1 + t2 + ts", T, "s", "ISO 13855:2010, Clause 5"),
        *extra,
        Term("K", "approach speed", K, "mm/s", f"ISO 13855:2010, {rule.split(':')[0]}"),
        Term("C", "intrusion distance", C, "mm", f"ISO 13855:2010, {rule.split(':')[0]}"),
        Term("S", "minimum distance K T + C", S, "mm", "ISO 13855:2010, Clause 5"),
    )
    return MinimumDistance(S=S, K=K, T=T, C=C, rule=f"ISO 13855:2010, {rule}", terms=terms, notes=tuple(notes))


def intrusion_from_detection_capability(d_mm: float) -> float:
    """C [mm] of a detection capability d [mm] by the light-curtain rule (8 (d - 14), not below 0, for d <= 40;
    850 for 40 < d <= 70), e.g. for the C term of ISO/TS 15066 speed and separation monitoring."""
    d = _mm(d_mm, "detection_capability", 1.0, 70.0)
    return max(0.0, 8.0 * (d - 14.0)) if d <= 40 else 850.0
