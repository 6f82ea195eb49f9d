"""robot_description text is data: model_from_urdf_text never opens a path and caps the description's size."""

from __future__ import annotations

import builtins
import io
import os
import time
import uuid

import pytest

from vtm_dynamics.core.robot.model import ModelError
from vtm_dynamics.nodes.model_source import load_urdf_text, model_from_urdf_text, urdf_root_link


def _chain(n: int, name: str = "chain") -> str:
    parts = [f'<robot name="{name}">', '<link name="l0"/>']
    for i in range(1, n):
        parts.append(f'<link name="l{i}"><inertial><mass value="1"/>'
                     '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>')
        parts.append(f'<joint name="j{i}" type="revolute"><parent link="l{i - 1}"/><child link="l{i}"/>'
                     '<axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')
    return "\n".join(parts + ["</robot>"])


def test_a_path_in_robot_description_is_never_opened(tmp_path, monkeypatch):
    marker = f"MARKER-{uuid.uuid4().hex}"
    path = tmp_path / "x<robot name='y'>.urdf"  # contains '<robot': the old check let it through to open()
    path.write_text(_chain(3, marker))
    opened = []

    def refuse(*args, **kwargs):
        opened.append(args[0] if args else "?")
        raise AssertionError("a file was opened")

    monkeypatch.setattr(builtins, "open", refuse)
    monkeypatch.setattr(io, "open", refuse)
    monkeypatch.setattr(os.path, "isfile", refuse)
    for text in (str(path), "/etc/hostname", "/proc/self/environ"):
        with pytest.raises(ModelError) as err:
            model_from_urdf_text(text)
        assert marker not in str(err.value) and text not in str(err.value) and "\n" not in str(err.value)
    assert opened == []


def test_a_thirty_thousand_link_description_is_rejected_fast():
    text = '<robot name="flat">' + "".join(f'<link name="l{i}"/>' for i in range(30_000)) + "</robot>"  # 0.6 MB
    t0 = time.perf_counter()
    with pytest.raises(ModelError, match="max_links"):
        model_from_urdf_text(text)
    assert time.perf_counter() - t0 < 2.0
    with pytest.raises(ModelError, match="max_links"):
        model_from_urdf_text(_chain(50), max_links=10)


def test_the_shipped_descriptions_still_load():
    assert model_from_urdf_text(load_urdf_text("ur5")).nv == 6
    assert urdf_root_link(load_urdf_text("planar_3r"))
    with pytest.raises(ModelError, match="DTD"):
        urdf_root_link('<!DOCTYPE r [<!ENTITY a "b">]><robot name="&a;"><link name="l"/></robot>')


def test_a_urdf_path_parameter_naming_a_device_is_refused_without_reading(tmp_path):
    path = tmp_path / "arm.urdf"
    os.symlink("/dev/zero", path)  # was read until memory ran out (2.7 GB in 7 s under a 3 GB limit)
    with pytest.raises(ModelError, match="^urdf_path: .*is not a regular file"):
        load_urdf_text(urdf_path=str(path))
