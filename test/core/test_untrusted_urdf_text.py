"""URDF text from a message is data: never a path, parsed with size, count and depth limits, no DTD/entities.

Every core entry point that takes a URDF is tried with paths (an existing file holding a unique marker, a system
file, a missing file, a path that contains '<robot'), with a description of 30,000 links, with a 2,000-body
solvability request, with entity bombs and with deep nesting. Reading files is the explicit ``read_urdf_file``.
"""

from __future__ import annotations

import builtins
import io
import os
import time
import uuid
from pathlib import Path

import pytest

from vtm_dynamics.core.reactions.absolute_coordinates import load_absolute_model
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.reactions.solvability import analyze_solvability
from vtm_dynamics.core.robot.urdf_extension import parse_urdf_extension

URDF_DIR = Path(__file__).resolve().parents[2] / "urdf"
SAFETY_NET_S = 2.0  # a generous bound; the measured times are far below it

ENTRY_POINTS = {
    "parse_urdf_extension": parse_urdf_extension,
    "RobotModel.from_urdf": RobotModel.from_urdf,
    "load_absolute_model": load_absolute_model,
    "analyze_solvability": analyze_solvability,
}


def _link(name: str) -> str:
    return (f'<link name="{name}"><inertial><mass value="1"/>'
            '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>')


def chain_urdf(n_links: int, robot_name: str = "chain") -> str:
    """A serial chain of ``n_links`` links (``n_links - 1`` revolute joints)."""
    parts = [f'<robot name="{robot_name}">', '<link name="l0"/>']
    for i in range(1, n_links):
        parts.append(_link(f"l{i}"))
        parts.append(f'<joint name="j{i}" type="revolute"><parent link="l{i - 1}"/><child link="l{i}"/>'
                     '<axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')
    parts.append("</robot>")
    return "\n".join(parts)


@pytest.fixture
def no_file_access(monkeypatch):
    """Call the returned function to make any file open or probe fail the test from then on."""
    opened: list[str] = []

    def refuse(*args, **kwargs):
        opened.append(str(args[0]) if args else "?")
        raise AssertionError(f"a file was opened: {args[0] if args else '?'}")

    def probe(path, *args, **kwargs):
        opened.append(str(path))
        raise AssertionError(f"the file system was probed: {path}")

    def arm() -> list[str]:
        monkeypatch.setattr(builtins, "open", refuse)
        monkeypatch.setattr(io, "open", refuse)
        monkeypatch.setattr(os, "open", refuse)
        monkeypatch.setattr(os.path, "isfile", probe)
        monkeypatch.setattr(os.path, "exists", probe)
        return opened

    return arm


def _path_inputs(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """name -> (input text, a secret that must never appear in an error)."""
    marker = f"MARKER-{uuid.uuid4().hex}"
    secret = tmp_path / "secret.urdf"
    secret.write_text(chain_urdf(3, robot_name=marker))
    angled = tmp_path / "a<robot name='x'>.urdf"  # a path that contains '<robot'
    angled.write_text(chain_urdf(3, robot_name=marker))
    return {
        "marker file": (str(secret), marker),
        "path containing <robot": (str(angled), marker),
        "system file": ("/etc/hostname", "hostname"),
        "missing file": (str(tmp_path / "missing.urdf"), "missing.urdf"),
        "proc environ": ("/proc/self/environ", "environ"),
    }


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_a_path_is_never_opened_and_never_echoed(entry, tmp_path, no_file_access):
    fn = ENTRY_POINTS[entry]
    inputs = _path_inputs(tmp_path)
    opened = no_file_access()
    for label, (text, secret) in inputs.items():
        with pytest.raises(ValueError) as err:
            fn(text)
        message = str(err.value)
        assert "not URDF XML text" in message, (entry, label, message)
        assert secret not in message and text not in message, (entry, label, message)
        assert "\n" not in message
    assert opened == []


def test_files_are_read_only_by_the_explicit_reader(tmp_path):
    from vtm_dynamics.core.robot.urdf_extension import URDFExtensionError, read_urdf_file

    path = tmp_path / "ok.urdf"
    path.write_text(chain_urdf(3, robot_name="from_file"))
    text = read_urdf_file(str(path))
    assert RobotModel.from_urdf(text).name == "from_file"
    assert RobotModel.from_urdf_file(str(path)).name == "from_file"
    assert analyze_solvability(read_urdf_file(str(URDF_DIR / "parallelogram_4bar.urdf"))).redundancy > 0
    with pytest.raises(URDFExtensionError, match="cannot read"):
        read_urdf_file(str(tmp_path / "missing.urdf"))
    marker = f"MARKER-{uuid.uuid4().hex}"
    bad = tmp_path / "bad.urdf"
    bad.write_text(f"{marker} is not xml")
    with pytest.raises(ValueError) as err:  # the file's contents are applied the text rule once, never echoed
        RobotModel.from_urdf_file(str(bad))
    assert marker not in str(err.value)


def flat_urdf(n_links: int) -> str:
    """``n_links`` bare links and one joint: the 0.6 MB, 30,000-link description of the issue."""
    links = "".join(f'<link name="l{i}"/>' for i in range(n_links))
    return (f'<robot name="flat">{links}<joint name="j" type="revolute"><parent link="l0"/><child link="l1"/>'
            '<axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint></robot>')


def compact_chain_urdf(n_links: int) -> str:
    """A serial chain without inertias (~180 bytes per link)."""
    parts = ['<robot name="chain">', '<link name="l0"/>']
    for i in range(1, n_links):
        parts.append(f'<link name="l{i}"/><joint name="j{i}" type="revolute"><parent link="l{i - 1}"/>'
                     f'<child link="l{i}"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/>'
                     '</joint>')
    return "\n".join(parts + ["</robot>"])


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_thirty_thousand_links_are_rejected_fast(entry):
    text = flat_urdf(30_000)
    assert len(text.encode()) < 2_000_000, "the count cap, not the byte cap, must reject this"
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as err:
        ENTRY_POINTS[entry](text)
    elapsed = time.perf_counter() - t0
    assert "<link>" in str(err.value) and "\n" not in str(err.value)
    assert elapsed < SAFETY_NET_S, f"{entry} took {elapsed:.2f} s"


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_a_long_chain_never_reaches_pinocchio(entry):
    # Before the caps, Pinocchio raised MemoryError on a 3,000-link chain and crashed the process (SIGSEGV) on
    # this 10,000-link one (1.8 MB): no exception handler can keep a node alive then.
    text = compact_chain_urdf(10_000)
    assert len(text.encode()) < 2_000_000
    with pytest.raises(ValueError, match="max_links|max_dof|max_bodies"):
        ENTRY_POINTS[entry](text)


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_degrees_of_freedom_are_capped_before_pinocchio_allocates(entry):
    # Before the cap, 300 revolute joints on one base built a model whose Pinocchio workspace took 1.8 GB (~nv^3).
    joints = "".join(f'<link name="l{i}"/><joint name="j{i}" type="revolute"><parent link="l0"/><child link="l{i}"/>'
                     '<axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>'
                     for i in range(1, 301))
    text = f'<robot name="star"><link name="l0"/>{joints}</robot>'
    with pytest.raises(ValueError, match="degrees of freedom|max_bodies"):  # the analysis' own cap may come first
        ENTRY_POINTS[entry](text)


def test_duplicate_checks_are_linear_when_the_caps_are_raised():
    links = "".join(f'<link name="l{i}"/>' for i in range(30_000))
    text = f'<robot name="dup">{links}<link name="l7"/></robot>'
    t0 = time.perf_counter()
    from vtm_dynamics.core.robot.urdf_extension import URDFExtensionError
    with pytest.raises(URDFExtensionError, match="duplicate link names: l7"):
        parse_urdf_extension(text, max_links=100_000)
    assert time.perf_counter() - t0 < SAFETY_NET_S


def test_the_solvability_analysis_has_its_own_body_cap():
    text = chain_urdf(2_000)
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="bodies"):
        analyze_solvability(text)
    assert time.perf_counter() - t0 < SAFETY_NET_S
    assert analyze_solvability(chain_urdf(20)).n_bodies == 19
    with pytest.raises(ValueError, match="bodies"):
        analyze_solvability(chain_urdf(20), max_bodies=10)


def test_the_byte_cap_is_checked_first():
    text = chain_urdf(3).replace("</robot>", "<!--" + "x" * 3_000_000 + "--></robot>")
    for fn in ENTRY_POINTS.values():
        with pytest.raises(ValueError, match="bytes"):
            fn(text)
    assert RobotModel.from_urdf(text, max_bytes=4_000_000).nv == 2


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE robot [
 <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
 <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
 <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
 <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
 <!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">
 <!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">
 <!ENTITY g "&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;">
 <!ENTITY h "&g;&g;&g;&g;&g;&g;&g;&g;&g;&g;">
 <!ENTITY i "&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;">
]>
<robot name="&i;"><link name="l0"/></robot>"""

# below expat's own amplification threshold: the standard library would expand this to a 4 MB robot name
QUIET_EXPANSION = chain_urdf(3).replace('<robot name="chain">', """<?xml version="1.0"?>
<!DOCTYPE robot [
 <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
 <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
 <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
 <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
 <!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">
]>
<robot name="&e;&e;&e;&e;">""")

EXTERNAL_ENTITY = chain_urdf(3).replace('<robot name="chain">', """<?xml version="1.0"?>
<!DOCTYPE robot [<!ENTITY secret SYSTEM "file:///etc/hostname">]>
<robot name="&secret;">""")


@pytest.mark.parametrize("text", [BILLION_LAUGHS, QUIET_EXPANSION, EXTERNAL_ENTITY],
                         ids=["billion_laughs", "quiet_expansion", "external_entity"])
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_entity_declarations_are_refused_in_one_line(entry, text):
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as err:
        ENTRY_POINTS[entry](text)
    message = str(err.value)
    assert "DTD" in message and "\n" not in message and len(message) < 200, message
    assert time.perf_counter() - t0 < SAFETY_NET_S


def test_nesting_depth_is_capped():
    deep = chain_urdf(3).replace("</robot>", "<a>" * 10_000 + "</a>" * 10_000 + "</robot>")
    for name in ("parse_urdf_extension", "load_absolute_model"):
        with pytest.raises(ValueError, match="nested deeper"):
            ENTRY_POINTS[name](deep)
    assert parse_urdf_extension(deep, max_depth=20_000).links == ("l0", "l1", "l2")


def test_attacker_chosen_names_are_not_echoed_at_length():
    long_name = "n" * 100_000
    text = f'<robot name="x"><link name="{long_name}"/><link name="{long_name}"/></robot>'
    with pytest.raises(ValueError) as err:
        parse_urdf_extension(text)
    assert "duplicate link names" in str(err.value) and len(str(err.value)) < 300
