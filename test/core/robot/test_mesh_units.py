"""The length unit of a COLLADA file (core/robot/mesh_units.py): its <asset><unit meter>, 1 when it says none,
read from the head of the file only, with the document type refused, and a unit that is no length refused in one
line."""

from __future__ import annotations

import os

import pytest

from test.collada_testdata import cube_dae
from vtm_dynamics.core.robot.mesh_units import MeshUnitError, collada_unit, mesh_file_unit


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("meter, unit", [("1", 1.0), ("0.001", 0.001), (" 0.0254 ", 0.0254), ("1e3", 1000.0)])
def test_the_unit_is_the_meter_attribute_of_the_asset(tmp_path, meter, unit):
    assert mesh_file_unit(_write(tmp_path, "m.dae", cube_dae("1").replace('meter="1"', f'meter="{meter}"'))) == unit


def test_without_a_unit_or_an_asset_a_coordinate_is_a_metre_and_other_formats_have_no_unit(tmp_path):
    no_unit = cube_dae("0.001").replace('<unit name="probe" meter="0.001"/>', "")
    assert mesh_file_unit(_write(tmp_path, "a.dae", no_unit)) == 1.0
    no_asset = no_unit.replace("<asset><up_axis>Z_UP</up_axis></asset>", "")
    assert "<asset>" not in no_asset and mesh_file_unit(_write(tmp_path, "b.dae", no_asset)) == 1.0
    # a <unit> outside <asset> (in a node) is not the document's unit
    stray = no_unit.replace('<node id="cube-node" name="cube">', '<node id="cube-node" name="cube"><unit meter="9"/>')
    assert mesh_file_unit(_write(tmp_path, "c.dae", stray)) == 1.0
    assert mesh_file_unit(_write(tmp_path, "d.stl", "solid x\nendsolid x\n")) == 1.0


def test_only_the_head_of_the_file_is_read_and_the_descriptor_keeps_its_position(tmp_path):
    """What follows <asset> is not parsed (here: text that is no XML at all), and an <asset> that has not ended
    within the head is refused."""
    path = _write(tmp_path, "m.dae", cube_dae("0.001").split("<library_geometries>")[0] + "<<< not xml " * 10000)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.lseek(fd, 7, os.SEEK_SET)
        assert collada_unit(fd) == 0.001 and os.lseek(fd, 0, os.SEEK_CUR) == 7
    finally:
        os.close(fd)
    padded = cube_dae("0.001").replace("<asset>", "<asset><contributor><comments>" + "x" * 5000 +
                                       "</comments></contributor>")
    with pytest.raises(MeshUnitError, match="does not end within the first 4096 bytes"):
        mesh_file_unit(_write(tmp_path, "p.dae", padded), max_head=4096)


@pytest.mark.parametrize("text, words", [
    ('<?xml version="1.0"?><!DOCTYPE COLLADA SYSTEM "file:///etc/passwd"><COLLADA><asset/></COLLADA>', "DTD"),
    ('<?xml version="1.0"?><!DOCTYPE c [<!ENTITY e "x">]><COLLADA><asset/></COLLADA>', "DTD"),
    ("<COLLADA><asset><unit meter='0.001'>", "not well-formed"),
    ("<robot><asset><unit meter='0.001'/></asset></robot>", "not a COLLADA document"),
    ("<COLLADA><asset><unit meter='mm'/></asset></COLLADA>", "is not a length from 1e-06 m to 1000 m"),
    ("<COLLADA><asset><unit meter='-0.001'/></asset></COLLADA>", "is not a length"),
    ("<COLLADA><asset><unit meter='1001'/></asset></COLLADA>", "is not a length"),
])
def test_a_file_whose_unit_cannot_be_read_safely_is_refused_in_one_line(tmp_path, text, words):
    with pytest.raises(MeshUnitError) as err:
        mesh_file_unit(_write(tmp_path, "m.dae", text))
    assert words in str(err.value) and "\n" not in str(err.value)
