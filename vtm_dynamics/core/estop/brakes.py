"""Joint brakes for emergency-stop prediction: engage delay, sliding and holding torque, viscous drag, pawls.

The e-stop scenario of Müller 2026, Sec. 1: when the brakes are activated the robot "is initially moving according
to the brakes' sliding friction. The individual joints eventually lock and enter the stiction phase." A brake is
the generalized force Q of Müller 2026, eq. (3) acting on one joint coordinate:

* before it engages (``engage_delay`` [s] after the brake command) it exerts nothing;
* while its joint slides (velocity v != 0) it exerts

      tau = -r(t) * [sign(v) * (sliding + (breakaway - sliding) * exp(-(v / v_s)^2)) + viscous * v]   [N m]

  a Coulomb part opposing the velocity with an optional Stribeck rise to ``breakaway_torque`` at low speed
  (characteristic speed v_s = ``stribeck_velocity`` [rad/s]; off unless both are given, breakaway defaults to
  sliding) plus an optional viscous part;
* r(t) is the brake's rise: 0 before ``engage_delay``, then rising linearly to 1 over ``rise_time`` [s]
  (r = min(1, (t - engage_delay) / rise_time); ``rise_time`` 0 = a step, full torque at engagement). The holding
  capacity rises with the same r(t). Physical source: the armature of a spring-applied brake needs a few ms to
  close the air gap once the coil current has decayed, so the friction torque builds up over that time;
* at rest it sticks while the torque needed to hold the joint stays within r(t) * ``holding_torque`` [N m]
  (static capacity; default: the breakaway torque, which defaults to the sliding torque); the stick/slip decision
  itself is made in :mod:`vtm_dynamics.core.estop`. One rule orders the three torques of every brake,
  holding >= breakaway >= sliding >= 0 (:func:`friction_order_problem`): a capacity below the friction a joint
  meets when it starts to slip from rest leaves the stick/slip decision without a consistent outcome, so such a
  file is refused where it is read, with the joint and field named;
* ``armature`` [kg m^2]: the rotor inertia of the drive reflected to the joint (Pinocchio's ``model.armature``),
  added to the diagonal of the mass matrix M(q) during the stop (the rotor turns with the joint whatever the
  brake does). It is a drive property carried in the brake entry because the stop is the only place it is used;
* an optional pawl/latch (``pawl_delay`` [s]) locks the joint abruptly at that time whatever its velocity: a
  joint-lock activation with the momentum-consistent jump of Müller 2026, eq. (22). ``pawl_holding_torque``
  defaults to infinity (a form lock).

Gear: a brake mounted on the motor side of a gear of ratio r (motor angle = r * joint angle) is described with
``side: motor``; its torques are motor-side values and become joint-side torques
tau_joint = r * tau_motor (sliding, breakaway and holding), viscous_joint = r**2 * viscous_motor and
armature_joint = r**2 * rotor_inertia (because the motor turns r times faster), stribeck_velocity_joint =
stribeck_velocity_motor / r. With ``side: joint`` (the default) every value is joint-side already. Gear losses are
not modelled. All numbers held by :class:`JointBrake` are
joint-side after conversion; ``gear_ratio`` and ``side`` are kept for reporting.

Configuration (YAML or an equivalent dict)::

    brakes:
      defaults: {engage_delay: 0.01}          # optional: applied to every listed joint
      joints:
        shoulder_pan_joint: {sliding_torque: 120.0, holding_torque: 160.0, viscous: 5.0}
        elbow_joint: {sliding_torque: 0.6, holding_torque: 0.8, gear_ratio: 101, side: motor}

        wrist_1_joint: {sliding_torque: 20.0, breakaway_torque: 26.0, stribeck_velocity: 0.05,
                        rise_time: 0.005, armature: 0.25}

Joints of the robot not listed have no brake (they never stop by themselves). Units: s, N m, N m s/rad, rad/s,
kg m^2; for a prismatic joint (a linear axis) the same fields are a force and its terms: N, N s/m, m/s, kg. Values beyond physical bounds (delays and rise times over ``MAX_BRAKE_DELAY`` = 10 s, torques over 1e6 N m,
viscous coefficients over 1e6 N m s/rad, gear ratios over 1e4, Stribeck speeds over 1e3 rad/s, armatures over
1e4 kg m^2) are refused with the field named. A configuration without the new fields (breakaway_torque,
stribeck_velocity, rise_time, armature) gives exactly the predictions of the model without them.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from vtm_dynamics.core.excerpt import clip, excerpt
from vtm_dynamics.core.limited_yaml import DEFAULT_MAX_YAML_BYTES, DEFAULT_MAX_YAML_DEPTH, load_yaml_text
from vtm_dynamics.core.robot.model import RobotModel

BRAKE_FIELDS = (
    "engage_delay", "sliding_torque", "holding_torque", "viscous", "pawl_delay", "pawl_holding_torque",
    "gear_ratio", "side", "breakaway_torque", "stribeck_velocity", "rise_time", "armature",
)
SIDES = ("joint", "motor")

# Physical bounds of configured brake values (as written, before the gear conversion): far beyond real brakes,
# so that only nonsense is refused (a PredictStop request carries brake YAML of its own).
MAX_BRAKE_DELAY = 10.0  # [s] engage_delay, pawl_delay: a brake engaging 10 s after the stop signal is no safety brake
MAX_BRAKE_TORQUE = 1e6  # [N m or N] sliding_torque, finite holding torques (the largest robot joints: ~1e5 N m)
MAX_BRAKE_VISCOUS = 1e6  # [N m s/rad or N s/m]
MAX_GEAR_RATIO = 1e4  # [-] (harmonic and cycloidal drives: 30-300)
MAX_STRIBECK_VELOCITY = 1e3  # [rad/s or m/s] (measured Stribeck speeds: 1e-3 to 1 rad/s)
MAX_ARMATURE = 1e4  # [kg m^2 or kg] (reflected rotor inertias of industrial arms: 0.01-50 kg m^2)


class BrakeConfigError(ValueError):
    """A brake configuration is invalid; the message is one line naming the offending field."""


@dataclass(frozen=True)
class JointBrake:
    """One joint's brake, joint-side values (see the module docstring for the model and the gear conversion).

    ``engage_delay`` [s] >= 0, ``sliding_torque`` [N m] >= 0, ``holding_torque`` [N m] >= 0 (static capacity),
    ``viscous`` [N m s/rad] >= 0, ``pawl_delay`` [s] or None, ``pawl_holding_torque`` [N m] (inf = form lock),
    ``gear_ratio`` (> 0, 1 for joint-side brakes) and ``side`` as configured; ``breakaway_torque`` [N m] (None:
    equal to the sliding torque, no Stribeck effect), ``stribeck_velocity`` [rad/s] (None or 0: off),
    ``rise_time`` [s] (0: step), ``armature`` [kg m^2] reflected rotor inertia (0: none).
    """

    joint: str
    engage_delay: float = 0.0
    sliding_torque: float = 0.0
    holding_torque: float = 0.0
    viscous: float = 0.0
    pawl_delay: float | None = None
    pawl_holding_torque: float = math.inf
    gear_ratio: float = 1.0
    side: str = "joint"
    breakaway_torque: float | None = None
    stribeck_velocity: float | None = None
    rise_time: float = 0.0
    armature: float = 0.0

    @property
    def stribeck(self) -> bool:
        """Whether the Stribeck term is on (a breakaway torque above the sliding torque and a positive speed)."""
        return (self.breakaway_torque is not None and self.breakaway_torque > self.sliding_torque
                and bool(self.stribeck_velocity))


def _number(value: Any, where: str, *, allow_inf: bool = False, positive: bool = False,
            upper: float = math.inf) -> float:
    """A finite (or, with ``allow_inf``, +inf) number >= 0 (> 0 if ``positive``) and, unless infinite, <= ``upper``."""
    if isinstance(value, bool):
        raise BrakeConfigError(f"{where}: expected a number, got {excerpt(value)}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise BrakeConfigError(f"{where}: expected a number, got {excerpt(value)}") from None
    if math.isinf(x) and isinstance(value, str) and value.strip().lower().lstrip("+.") not in ("inf", "infinity"):
        raise BrakeConfigError(f"{where}: {excerpt(value)} overflows to infinity (write .inf for an unlimited value)")
    if math.isnan(x) or (math.isinf(x) and not allow_inf):
        raise BrakeConfigError(f"{where}: must be finite, got {excerpt(value)}")
    if positive and not x > 0.0:
        raise BrakeConfigError(f"{where}: must be positive, got {excerpt(value)}")
    if x < 0.0:
        raise BrakeConfigError(f"{where}: must not be negative, got {excerpt(value)}")
    if math.isfinite(x) and x > upper:
        raise BrakeConfigError(f"{where}: {x:g} exceeds the physical bound {upper:g}")
    return x


FRICTION_ORDER = "holding >= breakaway >= sliding >= 0"


def friction_order_problem(sliding: float, breakaway: float | None, holding: float) -> str:
    """The one consistency rule of a brake's torques [N m], ``holding >= breakaway >= sliding >= 0`` (breakaway
    None: equal to sliding), checked where brake files are read (:func:`brake_from_mapping`) and where they are
    written (``vtm-calibrate``). Returns "" if it holds, else ``"<field>: <reason>"`` naming the first field that
    breaks it. A capacity below the friction a joint meets when it starts to slip from rest is no brake: the
    stick/slip decision then has no consistent outcome (a joint released at its capacity would be pushed back
    by a larger friction)."""
    if not sliding >= 0.0:
        return f"sliding_torque: {sliding:g} is negative ({FRICTION_ORDER})"
    if breakaway is not None and breakaway < sliding:
        return f"breakaway_torque: {breakaway:g} is below sliding_torque {sliding:g} ({FRICTION_ORDER})"
    static = sliding if breakaway is None else breakaway
    if holding < static:
        what = "sliding_torque" if breakaway is None else "breakaway_torque"
        return (f"holding_torque: {holding:g} is below {what} {static:g} ({FRICTION_ORDER}: a joint starting to "
                f"slip from rest meets {'the breakaway torque' if breakaway is not None else 'its sliding torque'})")
    return ""


def brake_from_mapping(joint: str, spec: Mapping[str, Any], prefix: str = "brakes.joints") -> JointBrake:
    """Validate one joint's brake entry (units in the module docstring) and convert it to joint-side values."""
    where = f"{prefix}.{clip(joint)}"
    if not isinstance(spec, Mapping):
        raise BrakeConfigError(f"{where}: expected a mapping of brake parameters")
    unknown = sorted(set(spec) - set(BRAKE_FIELDS), key=str)
    if unknown:
        raise BrakeConfigError(f"{where}.{clip(unknown[0])}: unknown brake parameter (known: {', '.join(BRAKE_FIELDS)})")
    side = spec.get("side", "joint")
    if side not in SIDES:
        raise BrakeConfigError(f"{where}.side: must be one of {', '.join(SIDES)}, got {excerpt(side)}")
    ratio = _number(spec.get("gear_ratio", 1.0), f"{where}.gear_ratio", positive=True, upper=MAX_GEAR_RATIO)
    r = ratio if side == "motor" else 1.0
    sliding = _number(spec.get("sliding_torque", 0.0), f"{where}.sliding_torque", upper=MAX_BRAKE_TORQUE)
    raw_break = spec.get("breakaway_torque")
    breakaway = None if raw_break is None else _number(raw_break, f"{where}.breakaway_torque", upper=MAX_BRAKE_TORQUE)
    raw_vs = spec.get("stribeck_velocity")
    stribeck_v = None if raw_vs is None else _number(raw_vs, f"{where}.stribeck_velocity", upper=MAX_STRIBECK_VELOCITY)
    if breakaway is not None and breakaway > sliding and not stribeck_v:
        raise BrakeConfigError(f"{where}.stribeck_velocity: must be positive when breakaway_torque exceeds "
                               "sliding_torque")
    holding = _number(spec.get("holding_torque", breakaway if breakaway is not None else sliding),
                      f"{where}.holding_torque", allow_inf=True, upper=MAX_BRAKE_TORQUE)
    problem = friction_order_problem(sliding, breakaway, holding)
    if problem:
        raise BrakeConfigError(f"{where}.{problem}")
    rise = _number(spec.get("rise_time", 0.0), f"{where}.rise_time", upper=MAX_BRAKE_DELAY)
    armature = _number(spec.get("armature", 0.0), f"{where}.armature", upper=MAX_ARMATURE)
    viscous = _number(spec.get("viscous", 0.0), f"{where}.viscous", upper=MAX_BRAKE_VISCOUS)
    delay = _number(spec.get("engage_delay", 0.0), f"{where}.engage_delay", upper=MAX_BRAKE_DELAY)
    pawl = spec.get("pawl_delay")
    pawl_delay = None if pawl is None else _number(pawl, f"{where}.pawl_delay", upper=MAX_BRAKE_DELAY)
    pawl_hold = _number(spec.get("pawl_holding_torque", math.inf), f"{where}.pawl_holding_torque", allow_inf=True,
                        upper=MAX_BRAKE_TORQUE)
    return JointBrake(
        joint=joint, engage_delay=delay, sliding_torque=r * sliding, holding_torque=r * holding,
        viscous=r * r * viscous, pawl_delay=pawl_delay, pawl_holding_torque=r * pawl_hold, gear_ratio=ratio,
        side=side, breakaway_torque=None if breakaway is None else r * breakaway,
        stribeck_velocity=None if stribeck_v is None else stribeck_v / r, rise_time=rise, armature=r * r * armature,
    )


@dataclass(frozen=True)
class BrakeSet:
    """The brakes of one robot as per-velocity-index arrays (length nv, joint-side values).

    Joints without a brake have zero torques and ``braked`` False. Built by :func:`brakes_from_config`.
    Arrays: ``engage_delay`` [s], ``sliding_torque`` / ``holding_torque`` [N m], ``viscous`` [N m s/rad],
    ``pawl_delay`` [s] (inf: no pawl), ``pawl_holding_torque`` [N m], ``breakaway_torque`` [N m] (equal to the
    sliding torque where the Stribeck term is off), ``stribeck_velocity`` [rad/s] (0: off), ``rise_time`` [s],
    ``armature`` [kg m^2] (the last four default to "off" when not given).
    """

    joint_names: tuple[str, ...]
    brakes: tuple[JointBrake, ...]
    braked: np.ndarray
    engage_delay: np.ndarray
    sliding_torque: np.ndarray
    holding_torque: np.ndarray
    viscous: np.ndarray
    pawl_delay: np.ndarray
    pawl_holding_torque: np.ndarray
    breakaway_torque: np.ndarray | None = None
    stribeck_velocity: np.ndarray | None = None
    rise_time: np.ndarray | None = None
    armature: np.ndarray | None = None
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        n = len(self.sliding_torque)
        if self.breakaway_torque is None:
            object.__setattr__(self, "breakaway_torque", np.array(self.sliding_torque, dtype=float))
        for name in ("stribeck_velocity", "rise_time", "armature"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.zeros(n))

    @property
    def stribeck(self) -> np.ndarray:
        """Per velocity index: whether the Stribeck term is on (breakaway above sliding, positive speed)."""
        return self.braked & (self.breakaway_torque > self.sliding_torque) & (self.stribeck_velocity > 0.0)

    @property
    def extended(self) -> bool:
        """Whether any of the terms beyond Coulomb + viscous is on (Stribeck, rise time, armature)."""
        return bool(self.stribeck.any() or np.any(self.braked & (self.rise_time > 0.0))
                    or np.any(self.braked & (self.armature > 0.0)))

    @classmethod
    def from_brakes(cls, robot: RobotModel, brakes: "list[JointBrake] | tuple[JointBrake, ...]", source: str = "") -> "BrakeSet":
        """Arrays for ``robot`` from individual brakes (each joint at most once, one velocity per joint)."""
        nv = robot.nv
        arr = {k: np.zeros(nv) for k in ("engage_delay", "sliding_torque", "holding_torque", "viscous",
                                         "breakaway_torque", "stribeck_velocity", "rise_time", "armature")}
        pawl = np.full(nv, np.inf)
        pawl_hold = np.full(nv, np.inf)
        braked = np.zeros(nv, dtype=bool)
        seen: set[str] = set()
        for b in brakes:
            if b.joint not in robot.joint_names:
                raise BrakeConfigError(
                    f"brakes.joints.{clip(b.joint)}: unknown joint of {robot.name!r} (joints: {', '.join(robot.joint_names)})"
                )
            if b.joint in seen:
                raise BrakeConfigError(f"brakes.joints.{b.joint}: listed twice")
            seen.add(b.joint)
            jc = robot.joint(b.joint)
            if jc.nv != 1:
                raise BrakeConfigError(f"brakes.joints.{b.joint}: only one-DOF joints can carry a brake")
            i = jc.idx_v
            braked[i] = True
            for k in ("engage_delay", "sliding_torque", "holding_torque", "viscous", "rise_time", "armature"):
                arr[k][i] = getattr(b, k)
            if b.stribeck:
                arr["breakaway_torque"][i] = b.breakaway_torque
                arr["stribeck_velocity"][i] = b.stribeck_velocity
            else:
                arr["breakaway_torque"][i] = b.sliding_torque
            pawl[i] = np.inf if b.pawl_delay is None else b.pawl_delay
            pawl_hold[i] = b.pawl_holding_torque
        return cls(
            joint_names=robot.joint_names, brakes=tuple(brakes), braked=braked, pawl_delay=pawl,
            pawl_holding_torque=pawl_hold, source=source, **arr,
        )

    def scaled(self, torque_factor: float = 1.0, delay_factor: float = 1.0, delay_offset: float = 0.0) -> "BrakeSet":
        """A copy with sliding/holding/viscous torques times ``torque_factor`` and delays
        ``delay_factor * delay + delay_offset`` [s] (for uncertainty envelopes); breakaway torques scale with the
        torque factor, pawls, Stribeck speeds, rise times and armatures are unchanged."""
        if not (torque_factor >= 0 and delay_factor >= 0 and np.isfinite(torque_factor) and np.isfinite(delay_factor)):
            raise BrakeConfigError("scale: factors must be finite and non-negative")
        delay = np.where(self.braked, np.maximum(self.engage_delay * delay_factor + delay_offset, 0.0), 0.0)
        return BrakeSet(
            joint_names=self.joint_names, brakes=self.brakes, braked=self.braked.copy(), engage_delay=delay,
            sliding_torque=self.sliding_torque * torque_factor, holding_torque=self.holding_torque * torque_factor,
            viscous=self.viscous * torque_factor, pawl_delay=self.pawl_delay.copy(),
            pawl_holding_torque=self.pawl_holding_torque.copy(),
            breakaway_torque=self.breakaway_torque * torque_factor, stribeck_velocity=self.stribeck_velocity.copy(),
            rise_time=self.rise_time.copy(), armature=self.armature.copy(), source=self.source,
        )

    def as_config(self) -> dict:
        """A plain dict (joint-side values) that :func:`brakes_from_config` accepts again."""
        joints = {}
        for i, name in enumerate(self.joint_names):
            if not self.braked[i]:
                continue
            entry = {
                "engage_delay": float(self.engage_delay[i]), "sliding_torque": float(self.sliding_torque[i]),
                "holding_torque": float(self.holding_torque[i]), "viscous": float(self.viscous[i]),
            }
            if self.stribeck[i]:
                entry["breakaway_torque"] = float(self.breakaway_torque[i])
                entry["stribeck_velocity"] = float(self.stribeck_velocity[i])
            for extra in ("rise_time", "armature"):
                if getattr(self, extra)[i] > 0.0:
                    entry[extra] = float(getattr(self, extra)[i])
            if np.isfinite(self.pawl_delay[i]):
                entry["pawl_delay"] = float(self.pawl_delay[i])
                entry["pawl_holding_torque"] = float(self.pawl_holding_torque[i])
            joints[name] = entry
        return {"brakes": {"joints": joints}}


def load_brake_yaml(path: str, *, max_bytes: int = DEFAULT_MAX_YAML_BYTES, max_depth: int = DEFAULT_MAX_YAML_DEPTH) -> dict:
    """Read a brake YAML file (trusted configuration) into a dict.

    The same limits as YAML text from a message apply (``core.limited_yaml``: ``max_bytes`` checked on the file
    size before reading, ``max_depth`` while parsing); YAML aliases are allowed in files. Every failure is a
    one-line ``BrakeConfigError`` naming the file by its base name, never quoting its contents.
    """
    if not isinstance(path, str) or not os.path.isfile(path):
        where = os.path.abspath(path) if isinstance(path, str) else path
        raise BrakeConfigError(f"brakes: file not found: {excerpt(where, 300)}")
    name = os.path.basename(path)
    try:
        if os.path.getsize(path) > max_bytes:
            raise BrakeConfigError(f"brakes: {name} has more than {max_bytes} bytes (max_bytes)")
        with open(path, encoding="utf-8") as fh:
            text = fh.read(max_bytes + 1)
    except (OSError, UnicodeDecodeError) as err:
        raise BrakeConfigError(f"brakes: cannot read {name}: {getattr(err, 'strerror', None) or type(err).__name__}") from None
    data = load_yaml_text(text, "brakes", BrakeConfigError, max_bytes=max_bytes, max_depth=max_depth,
                          allow_aliases=True, source=name)
    if not isinstance(data, Mapping):
        raise BrakeConfigError(f"brakes: {name} does not hold a mapping")
    return dict(data)


def brakes_from_config(robot: RobotModel, config: "Mapping[str, Any] | str") -> BrakeSet:
    """Validated :class:`BrakeSet` for ``robot`` from a YAML path or a dict with a top-level ``brakes`` key
    (format in the module docstring). Errors are ``BrakeConfigError`` naming the field, e.g.
    ``brakes.joints.elbow_joint.sliding_torque: must not be negative, got -3``."""
    source = ""
    if isinstance(config, str):
        source = config
        config = load_brake_yaml(config)
    if not isinstance(config, Mapping) or "brakes" not in config:
        raise BrakeConfigError("brakes: expected a mapping with a top-level 'brakes' key")
    section = config["brakes"]
    if not isinstance(section, Mapping):
        raise BrakeConfigError("brakes: expected a mapping with 'joints' (and optional 'defaults')")
    unknown = sorted(set(section) - {"defaults", "joints"}, key=str)
    if unknown:
        raise BrakeConfigError(f"brakes.{clip(unknown[0])}: unknown key (expected 'defaults' and 'joints')")
    defaults = section.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise BrakeConfigError("brakes.defaults: expected a mapping of brake parameters")
    bad = sorted(set(defaults) - set(BRAKE_FIELDS), key=str)
    if bad:
        raise BrakeConfigError(f"brakes.defaults.{clip(bad[0])}: unknown brake parameter")
    joints = section.get("joints")
    if not isinstance(joints, Mapping) or not joints:
        raise BrakeConfigError("brakes.joints: expected a non-empty mapping joint name -> brake parameters")
    brakes = []
    for name, spec in joints.items():
        if name not in robot.joint_names:
            raise BrakeConfigError(
                f"brakes.joints.{clip(name)}: unknown joint of {robot.name!r} (joints: {', '.join(robot.joint_names)})"
            )
        if spec is None:
            spec = {}
        if not isinstance(spec, Mapping):
            raise BrakeConfigError(f"brakes.joints.{clip(name)}: expected a mapping of brake parameters")
        brakes.append(brake_from_mapping(str(name), {**defaults, **spec}))
    return BrakeSet.from_brakes(robot, brakes, source)
