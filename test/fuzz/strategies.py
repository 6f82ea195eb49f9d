"""Hypothesis strategies for every input a vtm_dynamics node accepts from the ROS graph.

Each strategy draws a :class:`Case`: the message (or request) plus what the test may rely on about it, decided
while building it (never by asking the code under test):

``bad``      the input is certainly unusable or partly unusable (a node must say so in one log line or reply);
``note``     a short label of what was generated, printed by Hypothesis on a failure.

Sizes are bounded (``MAX_NAMES``, ``MAX_LINKS``, ...) so that an example costs milliseconds; the cases the issue
reproduced with larger sizes are explicit ``@example``\\ s in the tests.
"""

from __future__ import annotations

import atexit
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from builtin_interfaces.msg import Time
from hypothesis import strategies as st
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from vtm_msgs.msg import BrakeEvent, LockEvent
from vtm_msgs.srv import AnalyzeSolvability, PredictStop

UR5_JOINTS = ("shoulder_pan_joint", "shoulder_lift_joint", "elbow_joint", "wrist_1_joint", "wrist_2_joint",
              "wrist_3_joint")
SLIDER_CRANK_JOINTS = ("crank_joint", "rod_joint", "slider_joint")
MAX_NAMES = 3000  # [-] joint names in one generated JointState (the 20,000 is an explicit example)
MAX_LINKS = 300  # [-] links of a generated chain URDF (larger ones: explicit examples, child processes)
MAX_DEPTH = 3000  # [-] nesting depth of generated XML / YAML
MAX_POINTS = 2000  # [-] points of a generated trajectory

# A marker that the fuzz files below contain: it must never appear in any reply or log line.
SECRET = "vtm-fuzz-secret-7f3a9c"


@dataclass(frozen=True)
class Case:
    """One generated input: the message, whether it is certainly bad, and a label."""

    msg: Any
    bad: bool | None  # True: certainly bad; False: certainly valid; None: either
    note: str = ""
    fields: tuple[str, ...] = field(default_factory=tuple)  # request fields a reply to a bad input may name

    def __repr__(self) -> str:  # Hypothesis prints failing examples: keep huge messages readable
        text = repr(self.msg)
        if len(text) > 600:
            text = text[:400] + f" ... ({len(text)} chars) ... " + text[-150:]
        return f"Case(bad={self.bad}, note={self.note!r}, msg={text})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # Hypothesis' printer: the same bounded text
        printer.text(repr(self))


@dataclass(frozen=True)
class AtRunTime:
    """A message built when the test runs, for stamps relative to the clock then (``build(now_sec)``).

    An explicit ``@example`` is evaluated when its module is imported; a stamp taken then is as old as the time the
    suite needs to reach the test (on a slow machine, "1,000 s in the future" is in the past by then)."""

    build: Any  # Callable[[int], message]: now [s since the epoch] -> the message
    label: str

    def __repr__(self) -> str:
        return f"AtRunTime({self.label})"


def message_of(msg: Any) -> Any:
    """The message itself, or the one an :class:`AtRunTime` builds from the clock now."""
    return msg.build(int(time.time())) if isinstance(msg, AtRunTime) else msg


# ------------------------------------------------------------------------------------------------ robots
_UR5: str | None = None


def ur5_urdf() -> str:
    """The UR5 URDF text the package ships (loaded once)."""
    global _UR5
    if _UR5 is None:
        from vtm_dynamics.nodes.model_source import load_urdf_text

        _UR5 = load_urdf_text("ur5")
    return _UR5


def slider_crank_urdf() -> str:
    """The slider-crank URDF of the package (with its ``<loop_closure>``)."""
    from vtm_dynamics.core.package_data import package_data_file

    with open(package_data_file("urdf", "slider_crank.urdf"), encoding="utf-8") as f:
        return f.read()


# ------------------------------------------------------------------------------------------------ files
def fuzz_files() -> dict[str, str]:
    """Files the strategies name as 'paths' in text fields: each holds ``SECRET`` (and one even holds a valid
    URDF), so that reading one is visible in a reply or in the model. Created once per process."""
    global _FILES
    if _FILES is None:
        root = tempfile.mkdtemp(prefix="vtm_fuzz_")
        atexit.register(shutil.rmtree, root, True)
        files = {
            "secret": os.path.join(root, "secret.txt"),
            "robot_tag": os.path.join(root, "<robot name='x'>.urdf"),  # a path that contains '<robot'
            "urdf": os.path.join(root, "planar.urdf"),
        }
        with open(files["secret"], "w", encoding="utf-8") as f:
            f.write(f"{SECRET}\nroot:x:0:0\n")
        with open(files["robot_tag"], "w", encoding="utf-8") as f:
            f.write(f"<robot name='{SECRET}'><link name='{SECRET}'/></robot>\n")
        with open(files["urdf"], "w", encoding="utf-8") as f:
            f.write(chain_urdf(2, name=SECRET))
        _FILES = {**files, "root": root}
    return _FILES


_FILES: dict[str, str] | None = None


def path_texts() -> st.SearchStrategy[str]:
    """Text that names a file instead of holding XML: system files and the fuzz files holding ``SECRET``."""
    files = fuzz_files()
    plain = st.sampled_from([
        "/etc/hostname", "/etc/passwd", "/proc/self/environ", "~/.bashrc", "/dev/zero", "/dev/urandom",
        "/proc/self/cmdline", "../../../../etc/hostname", "file:///etc/passwd", "/nonexistent/robot.urdf",
        files["secret"], files["robot_tag"], files["urdf"], " " + files["urdf"], files["root"],
    ])
    return st.one_of(plain, plain.map(lambda p: p + "\n"), st.just(files["urdf"] + " <robot"))


# ------------------------------------------------------------------------------------------------ numbers
NASTY_FLOATS = (math.nan, math.inf, -math.inf, 1e300, -1e300, 1e6, -1e6, 5e-324, -0.0, 1.7976931348623157e308)


def floats(nasty: bool = True, lo: float = -10.0, hi: float = 10.0) -> st.SearchStrategy[float]:
    ordinary = st.floats(lo, hi, allow_nan=False, allow_infinity=False)
    return st.one_of(ordinary, st.sampled_from(NASTY_FLOATS)) if nasty else ordinary


def stamps(now_sec: int) -> st.SearchStrategy[tuple[Time, str]]:
    """(stamp, kind): kind is 'now', 'zero', 'past', 'future', 'negative' or 'odd' (nanosec >= 1e9)."""
    return st.one_of(
        st.integers(0, 999_999_999).map(lambda ns: (Time(sec=now_sec, nanosec=ns), "now")),
        st.just((Time(sec=0, nanosec=0), "zero")),
        st.integers(1, 10**6).map(lambda d: (Time(sec=max(0, now_sec - d), nanosec=0), "past")),
        st.sampled_from([1, 10, 10**6, 2**31 - 1 - now_sec]).map(
            lambda d: (Time(sec=min(2**31 - 1, now_sec + d), nanosec=0), "future")),
        st.integers(-(2**31), -1).map(lambda s: (Time(sec=s, nanosec=0), "negative")),
        st.integers(10**9, 2**32 - 1).map(lambda ns: (Time(sec=now_sec, nanosec=ns), "odd")),
    )


# ------------------------------------------------------------------------------------------------ names
def joint_name_lists(known: tuple[str, ...]) -> st.SearchStrategy[tuple[list[str], str]]:
    """(names, kind): kind 'all' (every known joint, any order), 'subset', 'unknown', 'duplicate', 'empty',
    'huge' (up to MAX_NAMES generated names), 'strange' (empty string / very long / non-ASCII names)."""
    every = st.permutations(list(known)).map(lambda n: (list(n), "all"))
    subset = st.lists(st.sampled_from(known), min_size=1, max_size=len(known), unique=True).map(
        lambda n: (n, "subset" if len(n) < len(known) else "all"))
    unknown = st.tuples(st.permutations(list(known)), st.lists(st.text(min_size=1, max_size=12), min_size=1,
                                                                max_size=4)).map(
        lambda t: (list(t[0]) + [x for x in t[1] if x not in known], "unknown")
        if any(x not in known for x in t[1]) else (list(t[0]), "all"))
    duplicate = st.tuples(st.permutations(list(known)), st.sampled_from(known)).map(
        lambda t: (list(t[0]) + [t[1]], "duplicate"))
    huge = st.integers(len(known) + 1, MAX_NAMES).map(lambda n: (list(known) + [f"j{k}" for k in range(n - len(known))],
                                                                 "huge"))
    strange = st.sampled_from(["", "x" * 10_000, "ü\u0000joint", "shoulder_pan_joint "]).map(
        lambda s: (list(known) + [s], "strange"))
    return st.one_of(every, every, subset, unknown, duplicate, st.just(([], "empty")), huge, strange)


# ------------------------------------------------------------------------------------------------ JointState
@st.composite
def joint_states(draw, known: tuple[str, ...] = UR5_JOINTS, now_sec: int | None = None) -> Case:
    """sensor_msgs/JointState: known/unknown/duplicate/empty/huge names, mismatched arrays, non-finite values,
    zero/negative/future stamps."""
    now_sec = now_sec if now_sec is not None else int(time.time())  # stamps relative to the draw
    names, kind = draw(joint_name_lists(known))
    n = len(names)
    cheap = n > 50  # huge messages get cheap, uniform values
    lengths = {}
    for arr in ("position", "velocity", "effort"):
        choice = draw(st.sampled_from(["match", "match", "match", "empty", "off"]))
        if arr == "position" and choice == "empty":
            choice = "match"
        lengths[arr] = {"match": n, "empty": 0, "off": n + draw(st.sampled_from([-1, 1, 5]))}[choice]
        lengths[arr] = max(0, lengths[arr])
    values = {}
    for arr, k in lengths.items():
        if cheap:
            values[arr] = [draw(floats())] * k
        else:
            values[arr] = draw(st.lists(floats(), min_size=k, max_size=k))
    stamp, stamp_kind = draw(stamps(now_sec))
    msg = JointState(name=names, position=values["position"], velocity=values["velocity"], effort=values["effort"])
    msg.header.stamp = stamp
    mismatch = lengths["position"] != n or lengths["velocity"] not in (0, n) or lengths["effort"] not in (0, n)
    known_idx = [i for i, x in enumerate(names) if x in known]
    # efforts are carried along but used by no node: a NaN effort is not certainly bad
    nonfinite = any(not math.isfinite(values[a][i]) for a in ("position", "velocity") for i in known_idx
                    if i < len(values[a]))
    bad = (kind in ("unknown", "duplicate", "empty", "huge", "strange") or mismatch or nonfinite
           or stamp_kind == "future" and stamp.sec - now_sec > 1)
    return Case(msg, bad, f"{kind} names={n} lengths={lengths} stamp={stamp_kind} nonfinite={nonfinite}")


def valid_joint_state(names: tuple[str, ...], q, v, stamp: Time) -> JointState:
    msg = JointState(name=list(names), position=[float(x) for x in q], velocity=[float(x) for x in v])
    msg.header.stamp = stamp
    return msg


# ------------------------------------------------------------------------------------------------ events
def bools() -> st.SearchStrategy[Case]:
    return st.booleans().map(lambda b: Case(Bool(data=b), False, f"estop {b}"))


@st.composite
def brake_events(draw, known: tuple[str, ...] = UR5_JOINTS, now_sec: int | None = None) -> Case:
    """vtm_msgs/BrakeEvent: unknown actions and joints, NaN/inf/negative/huge overrides, mismatched arrays,
    extreme stamps."""
    now_sec = now_sec if now_sec is not None else int(time.time())  # stamps relative to the draw
    names, kind = draw(joint_name_lists(known).filter(lambda t: t[1] != "huge" or len(t[0]) < 200))
    action = draw(st.one_of(st.sampled_from([BrakeEvent.ENGAGE, BrakeEvent.RELEASE]), st.integers(2, 255)))
    msg = BrakeEvent(joint_names=names, action=action)
    stamp, stamp_kind = draw(stamps(now_sec))
    msg.header.stamp = stamp
    bad_values = False
    mismatch = False
    for arr, hi in (("engage_delay", 0.5), ("sliding_torque", 200.0), ("viscous_coefficient", 50.0),
                    ("holding_torque", 300.0)):
        choice = draw(st.sampled_from(["empty", "empty", "match", "off"]))
        k = {"empty": 0, "match": len(names), "off": len(names) + 1}[choice]
        vals = draw(st.lists(st.one_of(floats(False, 0.0, hi), st.sampled_from(NASTY_FLOATS + (-1.0, 1e4, 1e9))),
                             min_size=k, max_size=k))
        setattr(msg, arr, vals)
        mismatch |= choice == "off"
        for name, x in zip(names, vals):
            if name in known and not math.isnan(x):
                # a delay of 1e4 s or a torque of 1e9 N m is beyond any physically sensible cap
                huge = x >= (1e4 if arr == "engage_delay" else 1e9)
                bad_values |= x < 0 or huge or (math.isinf(x) and arr != "holding_torque")
    engage = action == BrakeEvent.ENGAGE
    bad = (action not in (BrakeEvent.ENGAGE, BrakeEvent.RELEASE) or kind in ("unknown", "huge", "strange")
           or engage and (mismatch or bad_values)
           or engage and stamp_kind == "future" and stamp.sec - now_sec > 1)
    return Case(msg, bad, f"action={action} {kind} n={len(names)} mismatch={mismatch} values_bad={bad_values} "
                          f"stamp={stamp_kind}")


@st.composite
def lock_events(draw, known: tuple[str, ...] = UR5_JOINTS, now_sec: int | None = None) -> Case:
    """vtm_msgs/LockEvent: unknown actions and joints, extreme stamps, long sources."""
    now_sec = now_sec if now_sec is not None else int(time.time())  # stamps relative to the draw
    names, kind = draw(joint_name_lists(known).filter(lambda t: t[1] != "huge" or len(t[0]) < 200))
    action = draw(st.one_of(st.sampled_from([LockEvent.LOCK, LockEvent.UNLOCK]), st.integers(2, 255)))
    msg = LockEvent(joint_names=names, action=action, source=draw(st.sampled_from(["pawl", "", "x" * 5000])))
    stamp, stamp_kind = draw(stamps(now_sec))
    msg.header.stamp = stamp
    bad = action not in (LockEvent.LOCK, LockEvent.UNLOCK) or kind in ("unknown", "huge", "strange", "empty")
    return Case(msg, bad, f"action={action} {kind} n={len(names)} stamp={stamp_kind}")


# ------------------------------------------------------------------------------------------------ URDF text
def chain_urdf(n_links: int, name: str = "chain", mass: float = 1.0, joint_prefix: str = "j") -> str:
    """A serial chain of ``n_links`` links joined by revolute joints (a valid URDF)."""
    parts = [f'<robot name="{name}">', '<link name="l0"/>']
    for k in range(1, n_links):
        parts.append(
            f'<link name="l{k}"><inertial><mass value="{mass!r}"/><origin xyz="0.1 0 0"/>'
            f'<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>'
            f'<joint name="{joint_prefix}{k}" type="revolute"><parent link="l{k - 1}"/><child link="l{k}"/>'
            f'<origin xyz="0.1 0 0"/><axis xyz="0 0 1"/>'
            f'<limit lower="-3" upper="3" effort="100" velocity="3"/></joint>')
    parts.append("</robot>")
    return "".join(parts)


def entity_bomb(levels: int, fan: int) -> str:
    """A small 'billion laughs' document: ``fan ** levels`` expansions (kept small by the callers)."""
    ents = ['<!ENTITY e0 "lol">']
    ents += [f'<!ENTITY e{k} "{("&e" + str(k - 1) + ";") * fan}">' for k in range(1, levels + 1)]
    return f'<?xml version="1.0"?><!DOCTYPE robot [{"".join(ents)}]><robot name="&e{levels};"><link name="a"/></robot>'


def deep_xml(depth: int) -> str:
    return '<robot name="deep"><link name="a">' + "<x>" * depth + "</x>" * depth + "</link></robot>"


def perturbed_masses(urdf: str, factor: float) -> str:
    """Every ``<mass value="...">`` of ``urdf`` times ``factor`` (a heavier or lighter robot, same joints)."""
    import re

    return re.sub(r'(<mass\s+value=")([^"]+)(")', lambda m: f"{m.group(1)}{float(m.group(2)) * factor!r}{m.group(3)}",
                  urdf)


@st.composite
def urdf_texts(draw, base_urdf: str, extension: bool = False, max_links: int = MAX_LINKS) -> Case:
    """robot_description / AnalyzeSolvability.urdf text: malformed XML, deep nesting, small entity bombs, long
    chains, file paths, the valid base URDF with perturbed masses (``bad``: the node must not take it silently),
    and (``extension``) perturbed vtm_dynamics extension elements."""
    kind = draw(st.sampled_from(["garbage", "truncated", "deep", "bomb", "chain", "path", "masses", "other_robot",
                                 "empty", "not_robot"] + (["extension"] * 3 if extension else [])))
    if kind == "garbage":
        text = draw(st.text(max_size=200))
    elif kind == "truncated":
        text = base_urdf[: draw(st.integers(1, max(1, len(base_urdf) - 12)))]
    elif kind == "deep":
        text = deep_xml(draw(st.integers(10, MAX_DEPTH)))
    elif kind == "bomb":
        text = entity_bomb(draw(st.integers(1, 4)), draw(st.integers(2, 10)))
    elif kind == "chain":
        text = chain_urdf(draw(st.integers(2, max_links)))
    elif kind == "path":
        text = draw(path_texts())
    elif kind == "masses":
        text = perturbed_masses(base_urdf, draw(st.sampled_from([10.0, 0.1, 1.5, 0.0, -1.0, 1e30])))
    elif kind == "other_robot":
        text = chain_urdf(4, name="other")
    elif kind == "empty":
        text = ""
    elif kind == "not_robot":
        text = '<?xml version="1.0"?><launch><node pkg="x"/></launch>'
    else:
        text = draw(extension_urdfs())
    return Case(String(data=text), True, f"{kind} ({len(text)} chars)", (kind,))


#: urdf_texts kinds that no analysis can accept (the others may be valid URDF for an analysis)
UNUSABLE_URDF_KINDS = frozenset({"garbage", "truncated", "path", "empty", "not_robot"})


# ------------------------------------------------------------------------------------------------ URDF extension
_SLIDER_TREE = (
    '<link name="base"/>'
    '<joint name="crank_joint" type="revolute"><parent link="base"/><child link="crank"/>'
    '<origin xyz="0 0 0" rpy="1.5707963267948966 0 0"/><axis xyz="0 0 1"/>'
    '<limit lower="-1000" upper="1000" effort="1000" velocity="1000"/></joint>'
    '<link name="crank"><inertial><origin xyz="0.5 0 0"/><mass value="1.0"/>'
    '<inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>'
    '<joint name="rod_joint" type="revolute"><parent link="crank"/><child link="rod"/>'
    '<origin xyz="0.5 0 0"/><axis xyz="0 0 1"/><limit lower="-1000" upper="1000" effort="1000" velocity="1000"/>'
    '</joint><link name="rod"><inertial><origin xyz="0.5 0 0"/><mass value="1.0"/>'
    '<inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>'
    '<joint name="slider_joint" type="revolute"><parent link="rod"/><child link="slider"/>'
    '<origin xyz="0.5 0 0"/><axis xyz="0 0 1"/><limit lower="-1000" upper="1000" effort="1000" velocity="1000"/>'
    '</joint><link name="slider"><inertial><mass value="0"/>'
    '<inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial></link>'
)
_LINKS = ("base", "crank", "rod", "slider", "world")
_NUMBERS = ("0", "1", "-1", "0.5", "nan", "inf", "-inf", "1e308", "", "x", "1 2", "0 0 0 0")


def _triple(draw) -> str:
    if draw(st.booleans()):
        return " ".join(draw(st.sampled_from(["0", "1", "0.5", "-1"])) for _ in range(3))
    return draw(st.sampled_from(_NUMBERS + ("0 0 0", "nan 0 0", "1e400 0 0")))


@st.composite
def extension_urdfs(draw) -> str:
    """The slider-crank tree with 0..4 generated ``<loop_closure>``, ``<knife_edge>`` and ``<driving_constraint>``
    elements: unknown types, missing or unknown links and joints, self loops, duplicate names, non-finite numbers,
    zero axes, missing attributes."""
    elements = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["loop_closure", "knife_edge", "driving_constraint"]))
        name = draw(st.sampled_from(["C", "C", "crank_joint", "", "k", "d"]))
        name_attr = "" if draw(st.integers(0, 9)) == 0 else f' name="{name}"'
        if kind == "loop_closure":
            typ = draw(st.sampled_from(["revolute", "prismatic", "spherical", "fixed", "planar", ""]))
            parent, child = draw(st.sampled_from(_LINKS + ("nope",))), draw(st.sampled_from(_LINKS + ("nope",)))
            parts = [f'<loop_closure{name_attr} type="{typ}">']
            if draw(st.integers(0, 9)):
                parts.append(f'<parent link="{parent}"/>')
            if draw(st.integers(0, 9)):
                parts.append(f'<child link="{child}"/>')
            parts.append(f'<origin xyz="{_triple(draw)}" rpy="{_triple(draw)}"/>')
            parts.append(f'<child_origin xyz="{_triple(draw)}" rpy="{_triple(draw)}"/>')
            parts.append(f'<axis xyz="{_triple(draw)}"/>')
            parts.append("</loop_closure>")
            elements.append("".join(parts))
        elif kind == "knife_edge":
            link = draw(st.sampled_from(_LINKS + ("nope",)))
            elements.append(f'<knife_edge{name_attr} link="{link}"><origin xyz="{_triple(draw)}"/>'
                            f'<axis xyz="{_triple(draw)}"/></knife_edge>')
        else:
            joint = draw(st.sampled_from(SLIDER_CRANK_JOINTS + ("nope", "")))
            elements.append(f'<driving_constraint{name_attr} joint="{joint}"/>')
    return f'<robot name="slider_crank_fuzz">{_SLIDER_TREE}{"".join(elements)}</robot>'


# ------------------------------------------------------------------------------------------------ brake YAML
@st.composite
def brake_yamls(draw, known: tuple[str, ...] = UR5_JOINTS) -> tuple[str, bool | None]:
    """(YAML text, bad: True certainly bad, False certainly valid, None either) for the brake configuration format
    of ``vtm_dynamics.core.estop.brakes``: deep nesting, anchors/aliases, wrong types, unknown fields and joints, negative / non-finite / huge numbers."""
    kind = draw(st.sampled_from(["valid", "fields", "nested", "aliases", "garbage", "scalar", "unknown_joint",
                                 "python_tag", "long"]))
    if kind == "nested":
        depth = draw(st.integers(10, MAX_DEPTH))
        opener = draw(st.sampled_from(["[", "{a: "]))
        closer = "]" if opener == "[" else "}"
        return "brakes: " + opener * depth + "1" + closer * depth, True
    if kind == "aliases":
        levels = draw(st.integers(1, 6))
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
        lines += [f"a{k}: &a{k} [" + ", ".join([f"*a{k - 1}"] * 9) + "]" for k in range(1, levels + 1)]
        return "\n".join(lines) + f"\nbrakes: *a{levels}\n", True
    if kind == "garbage":  # not empty: an empty brake_config_yaml is a valid request (the node's own brakes)
        return draw(st.text(min_size=1, max_size=120)), True
    if kind == "scalar":
        return draw(st.sampled_from(["42", "[]", "null", "brakes:", "brakes: 3", "brakes: {joints: 3}"])), True
    if kind == "python_tag":
        return "brakes: !!python/object/apply:os.system ['true']", True
    if kind == "long":
        return "brakes:\n  joints:\n" + "".join(f"    j{k}: {{sliding_torque: 1}}\n" for k in range(5000)), True
    joints = {}
    bad: bool | None = kind == "unknown_joint"
    for name in draw(st.lists(st.sampled_from(known), min_size=1, max_size=len(known), unique=True)):
        spec: dict[str, Any] = {"sliding_torque": 50.0, "holding_torque": 70.0}
        if kind == "fields":
            key = draw(st.sampled_from(["sliding_torque", "holding_torque", "viscous", "engage_delay", "gear_ratio",
                                        "side", "pawl_delay", "color"]))
            value = draw(st.sampled_from([-1.0, "nan", ".inf", "1e400", "abc", True, None, [1, 2], 0.0, 2.0,
                                          "motor", 1e300]))
            spec[key] = value
            if key == "side":
                fine = value == "motor"
            elif key == "color":
                fine = False
            elif value == ".inf" and key == "holding_torque":
                fine = None  # infinite holding capacity: a form lock, allowed by the format
            elif key == "pawl_delay" and value is None:
                fine = True  # null: no pawl
            elif key == "holding_torque":
                fine = False  # 2.0 or 0.0 is below the sliding torque 50.0: holding >= breakaway >= sliding
            else:
                fine = value == 2.0 or value == 0.0 and key != "gear_ratio"
            if fine is None:
                bad = None if bad is False else bad
            elif not fine:
                bad = True
        joints[name] = spec
    if kind == "unknown_joint":
        joints["not_a_joint"] = {"sliding_torque": 1.0}
    lines = ["brakes:", "  defaults: {engage_delay: 0.01}", "  joints:"]
    for name, spec in joints.items():
        body = ", ".join(f"{k}: {_yaml_scalar(v)}" for k, v in spec.items())
        lines.append(f"    {name}: {{{body}}}")
    return "\n".join(lines) + "\n", bad


def _yaml_scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(map(str, v)) + "]"
    return str(v)


# ------------------------------------------------------------------------------------------------ services
@st.composite
def predict_stop_requests(draw, q, v, now_sec: int | None = None) -> Case:
    """vtm_msgs/PredictStop requests: bad states (from ``joint_states``), nested / huge / hostile brake YAML,
    unknown categories and frames, extreme horizons; or a valid request (``bad`` False)."""
    now_sec = now_sec if now_sec is not None else int(time.time())  # stamps relative to the draw
    req = PredictStop.Request()
    fields = []  # certainly bad
    maybe: list[str] = []  # bad or not, the node may refuse them
    unsure = False
    if draw(st.integers(0, 2)) == 0:
        state = draw(joint_states(now_sec=now_sec))
        req.state = state.msg
        verdict = _request_state_verdict(state.msg, now_sec)
        if verdict:
            fields.append("state")
        elif verdict is None:
            unsure = True
            maybe.append("state")  # a node may refuse it (e.g. more names than its cap): then it says "state"
        note = "state:" + state.note
    else:
        req.state = valid_joint_state(UR5_JOINTS, q, v, Time(sec=now_sec))
        note = "state ok"
    req.stop_category = draw(st.sampled_from([0, 0, 1, 2, 255]))
    if req.stop_category not in (0, 1):
        fields.append("stop_category")
    if draw(st.booleans()):
        yaml_text, yaml_bad = draw(st.one_of(brake_yamls(), path_texts().map(lambda p: (p, True))))
        req.brake_config_yaml = yaml_text
        if yaml_bad:
            fields.append("brake_config_yaml")
        elif yaml_bad is None:
            unsure = True
            maybe.append("brake_config_yaml")
    req.tcp_frame = draw(st.sampled_from(["", "", "tool0", "no_such_frame", "x" * 5000]))
    if req.tcp_frame not in ("", "tool0"):
        fields.append("tcp_frame")
    req.horizon = draw(st.one_of(st.sampled_from([0.0, 0.0, 2.0, 5.0]),
                                 st.sampled_from([-1.0, math.nan, math.inf, 600.0, 1e6, 1e300])))
    if not (0.0 <= req.horizon <= 60.0):  # a horizon beyond a minute is no emergency stop
        fields.append("horizon")
    bad: bool | None = True if fields else (None if unsure else False)
    return Case(req, bad, f"{note} category={req.stop_category} horizon={req.horizon} "
                                   f"yaml={len(req.brake_config_yaml)} chars frame={req.tcp_frame[:12]!r}",
                tuple(fields + maybe))


def _request_state_verdict(msg: JointState, now_sec: int) -> bool | None:
    """Whether a PredictStop ``state`` is certainly bad (True), certainly usable (False) or either (None: extra
    unknown names, stamps other than zero or about now, values beyond the robot's limits)."""
    names = list(msg.name)
    n = len(names)
    if n == 0 or len(set(names)) != n or not set(UR5_JOINTS) <= set(names):
        return True
    if len(msg.position) != n or len(msg.velocity) != n or len(msg.effort) not in (0, n):
        return True
    known = [i for i, x in enumerate(names) if x in UR5_JOINTS]
    if not all(math.isfinite(msg.position[i]) and math.isfinite(msg.velocity[i]) for i in known):
        return True
    stamp_ok = msg.header.stamp.nanosec < 10**9 and (msg.header.stamp.sec == 0 or
                                                     abs(msg.header.stamp.sec - now_sec) <= 1)
    if n != len(UR5_JOINTS) or not stamp_ok:
        return None
    if any(abs(msg.position[i]) > 2 * math.pi or abs(msg.velocity[i]) > 3.2 for i in known):
        return None  # beyond the UR5's joint or speed limits: a node may refuse it
    return False


@st.composite
def analyze_requests(draw, base_urdf: str) -> Case:
    """vtm_msgs/AnalyzeSolvability requests: file paths, malformed URDF, extension fuzz, bad positions."""
    kind = draw(st.sampled_from(["valid", "urdf", "urdf", "positions"]))
    req = AnalyzeSolvability.Request(urdf=base_urdf, planar=draw(st.booleans()))
    fields: list[str] = []
    bad: bool | None = False
    note = kind
    if kind == "urdf":
        case = draw(urdf_texts(base_urdf, extension=True, max_links=12))
        req.urdf = case.msg.data
        note = "urdf " + case.note
        if case.fields[0] in UNUSABLE_URDF_KINDS:
            fields.append("urdf")
        else:
            bad = None
    elif kind == "positions":
        n = draw(st.sampled_from([1, 2, 3, 4, 1000]))
        req.positions = [draw(floats())] * n if n > 10 else draw(st.lists(floats(), min_size=n, max_size=n))
        if n != 3 or not all(math.isfinite(x) for x in req.positions):
            fields.append("positions")
        else:
            bad = None  # a configuration off the constraint manifold may or may not assemble
    if req.planar and kind != "urdf":
        fields.append("planar")  # the slider-crank moves in the x-z plane: planar analysis refuses it, naming it
    elif req.planar:
        bad = None if not fields else bad  # a fuzzed variant may fail elsewhere first
    bad = True if fields else bad
    return Case(req, bad, f"{note} urdf={len(req.urdf)} chars planar={req.planar} "
                                   f"positions={len(req.positions)}", tuple(fields))


# ------------------------------------------------------------------------------------------------ trajectories
@st.composite
def joint_trajectories(draw, known: tuple[str, ...] = SLIDER_CRANK_JOINTS) -> Case:
    """trajectory_msgs/JointTrajectory for projection_controller: unknown/missing joints, huge targets
    (1e6 rad, 1e300 rad), NaN, non-increasing times, mismatched arrays, up to MAX_POINTS points."""
    names, kind = draw(joint_name_lists(known).filter(lambda t: t[1] != "huge" or len(t[0]) < 100))
    n_points = draw(st.one_of(st.integers(0, 5), st.sampled_from([MAX_POINTS])))
    target = draw(st.one_of(floats(False, -0.5, 0.5), st.sampled_from([1e6, -1e6, 1e300, math.nan, math.inf, 4.0])))
    shape = draw(st.sampled_from(["ok", "ok", "times", "lengths"]))
    msg = JointTrajectory(joint_names=names)
    for k in range(n_points):
        p = JointTrajectoryPoint()
        p.positions = [target * (k + 1) / n_points] * (len(names) + (1 if shape == "lengths" else 0))
        t = 0.01 * (k + 1) if shape != "times" else 0.01 * (n_points - k)
        p.time_from_start.sec, p.time_from_start.nanosec = int(t), int(round((t - int(t)) * 1e9))
        msg.points.append(p)
    huge = not (math.isfinite(target) and abs(target) <= 1000.0)  # beyond the slider-crank's URDF limits
    # no points: "hold where you are" (documented), whatever the names; otherwise every model joint must be named
    bad = n_points > 0 and (kind != "all" or shape != "ok" and n_points > 1 or huge)
    return Case(msg, bad, f"{kind} n={len(names)} points={n_points} target={target} shape={shape}")


# ------------------------------------------------------------------------------------------------ stop-safe motion
def _pose(x: float = 0.0, y: float = 0.0, z: float = 0.0, w: float = 1.0) -> Any:
    from geometry_msgs.msg import Pose

    p = Pose()
    p.position.x, p.position.y, p.position.z, p.orientation.w = x, y, z, w
    return p


@st.composite
def check_trajectory_requests(draw, q, max_points: int, max_obstacles: int) -> Case:
    """vtm_msgs/CheckTrajectory requests for a UR5: a cheap valid request (two points, a wall far away, three
    E-stop instants) with some fields made bad: point counts beyond ``max_points`` or too few, unknown / missing /
    repeated joints, NaN or huge positions, times not increasing, arrays of the wrong length; obstacle counts
    beyond ``max_obstacles``, unsupported primitive types, wrong or non-finite dimensions, poses and names that do
    not match, non-unit quaternions; bad margins, categories, sample periods and floors; an empty scene."""
    from shape_msgs.msg import SolidPrimitive
    from vtm_msgs.srv import CheckTrajectory

    q = [float(x) for x in q]
    names = list(UR5_JOINTS)
    req = CheckTrajectory.Request(margin=0.02, sample_period=0.5, has_floor=True, floor_height=-0.3)
    req.obstacles = [SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.1, 1.0, 1.0])]
    req.obstacle_poses, req.obstacle_names = [_pose(x=1.5, z=0.5)], ["wall"]
    n_points, shape = 2, "ok"
    fields: list[str] = []
    kind = draw(st.sampled_from(["ok", "ok", "ok", "points", "names", "values", "times", "lengths", "obstacles",
                                 "primitive", "poses", "margin", "categories", "period", "floor", "empty"]))
    if kind == "points":
        n_points = draw(st.sampled_from([0, 1, max_points + 1, MAX_POINTS]))
        if not 2 <= n_points <= max_points:
            fields.append("trajectory")
    if kind == "names":
        names = draw(st.sampled_from([names[:5], names + ["extra"], ["x" * 300] + names[1:], [names[0]] * 6,
                                      ["no_such_joint"] + names[1:], []]))
        fields.append("trajectory")
    msg = JointTrajectory(joint_names=names)
    value = draw(st.sampled_from([math.nan, math.inf, 1e6, 1e300])) if kind == "values" else None
    for k in range(n_points):
        p = JointTrajectoryPoint()
        base = [q[j % 6] + 0.1 * k / max(n_points, 1) for j in range(len(names))]
        if value is not None and k == n_points - 1:
            base[0] = value
        p.positions = base + ([0.0] if kind == "lengths" and k == 1 else [])
        t = 1.0 * k / max(n_points - 1, 1) if kind != "times" else 1.0 - k
        p.time_from_start.sec, p.time_from_start.nanosec = int(math.floor(t)), int(round((t - math.floor(t)) * 1e9))
        msg.points.append(p)
    if kind in ("values", "times", "lengths"):
        fields.append("trajectory")
    req.trajectory = msg
    if kind == "obstacles":
        n = draw(st.sampled_from([max_obstacles + 1, 1000]))
        req.obstacles = [SolidPrimitive(type=1, dimensions=[0.1, 0.1, 0.1])] * n
        req.obstacle_poses, req.obstacle_names = [_pose(x=2.0)] * n, []
        fields.append("obstacles")
    if kind == "primitive":
        prim = draw(st.sampled_from([SolidPrimitive(type=0, dimensions=[1.0]), SolidPrimitive(type=5, dimensions=[1.0]),
                                     SolidPrimitive(type=255, dimensions=[]), SolidPrimitive(type=2, dimensions=[]),
                                     SolidPrimitive(type=1, dimensions=[1.0, 1.0]),
                                     SolidPrimitive(type=3, dimensions=[math.nan, 1.0]),
                                     SolidPrimitive(type=2, dimensions=[-1.0]),
                                     SolidPrimitive(type=1, dimensions=[1e300, 1.0, 1.0]),
                                     SolidPrimitive(type=4, dimensions=[1.0] * 10_000)]))
        req.obstacles = [prim]
        fields.append("obstacles")
    if kind == "poses":
        which = draw(st.sampled_from(["count", "quaternion", "nan", "names", "far"]))
        if which == "count":
            req.obstacle_poses = []
        elif which == "quaternion":
            req.obstacle_poses = [_pose(x=1.5, w=0.0)]
        elif which == "nan":
            req.obstacle_poses = [_pose(x=math.nan, w=1.0)]
        elif which == "far":
            req.obstacle_poses = [_pose(x=1e6)]
        else:
            req.obstacle_names = ["a", "b"]
        fields.append("obstacle_poses" if which != "names" else "obstacle_names")
    if kind == "margin":
        req.margin = draw(st.sampled_from([math.nan, math.inf, -5.0, 100.0]))
        fields.append("margin")
    if kind == "categories":
        req.stop_categories = draw(st.sampled_from([[2], [0, 0], [0, 1, 0], [255]]))
        fields.append("stop_categories")
    if kind == "period":
        req.sample_period = draw(st.sampled_from([-1.0, math.nan, math.inf, 1e-9, 1e-4]))
        fields.append("sample_period")
    if kind == "floor":
        req.floor_height = draw(st.sampled_from([math.nan, math.inf, 1e9]))
        fields.append("floor_height")
    if kind == "empty":
        req.obstacles, req.obstacle_poses, req.obstacle_names = [], [], []
        req.has_floor, req.self_collision = False, False
        fields.append("obstacles")
    req.search_speed_scaling = kind == "ok" and draw(st.integers(0, 4)) == 0
    return Case(req, bool(fields), f"{kind} points={n_points} names={len(names)}", tuple(fields))


@st.composite
def person_positions(draw) -> Case:
    """geometry_msgs/PointStamped on person_position: NaN, inf, huge coordinates, foreign or hostile frames."""
    from geometry_msgs.msg import PointStamped

    msg = PointStamped()
    msg.point.x, msg.point.y, msg.point.z = (draw(floats(True, -3.0, 3.0)) for _ in range(3))
    msg.header.frame_id = draw(st.sampled_from(["", "world", "camera", "x" * 10_000, "../../etc/passwd"]))
    coords = (msg.point.x, msg.point.y, msg.point.z)
    bad = not all(math.isfinite(c) and abs(c) <= 1000.0 for c in coords) or msg.header.frame_id not in ("", "world")
    return Case(msg, bad, f"point={coords} frame={msg.header.frame_id[:20]!r}", ("person_position",))
