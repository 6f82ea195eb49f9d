"""Test data for COLLADA units: a cube written out by hand (not by the code under test) in any length unit, and a
one-joint robot whose link carries it as visual and collision geometry.

The cube's edge is ``EDGE`` metres whatever unit it is written in: in metres with ``<unit meter="1"/>`` and in
millimetres (every coordinate times 1000) with ``<unit meter="0.001"/>`` it is the same body, which is how RViz
draws both.
"""

from __future__ import annotations

import os

EDGE = 0.1  # [m] the cube's edge in every file
# (x, y, z) of the cube's centre in its own frame [m]: off the origin in z, so a file turned about x (an up axis
# applied) would put it elsewhere
CENTRE = (0.0, 0.0, 0.2)

URDF = """<robot name="unit_probe">
  <link name="base"/>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <link name="arm">
    <inertial><origin xyz="0 0 0.2"/><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><geometry><mesh filename="{name}"{scale}/></geometry></visual>
    <collision><geometry><mesh filename="{name}"{scale}/></geometry></collision>
  </link>
</robot>"""

# the cube's 12 triangles over its 8 corners (corner k has x, y, z = bits 2, 1, 0 of k), outward normals
_TRIANGLES = ((0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1),
              (2, 3, 7), (2, 7, 6), (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3))


def cube_dae(meter: str | float, up_axis: str = "Z_UP", asset_extra: str = "", materials: int = 1,
             twin: float | None = None) -> str:
    """COLLADA text of the cube (``EDGE`` m at ``CENTRE``) written in the unit ``meter`` metres (coordinates
    divided by it), with that ``<unit>`` and ``<up_axis>``; ``asset_extra`` goes into ``<asset>`` first. With
    ``materials`` > 1 its triangles are split into that many ``<triangles>`` elements of their own materials (as
    CAD exporters write a part of several colours). ``twin`` [m]: a second cube, ``twin`` further along x, in the
    same geometry with a material of its own (its own ``<triangles>`` element)."""
    per = float(meter) if 0 < float(meter) < float("inf") else 1.0  # a nonsense unit: the numbers in metres
    corners = []
    for shift in (0.0,) if twin is None else (0.0, twin):
        for k in range(8):
            for axis, bit in enumerate((4, 2, 1)):
                offset = shift if axis == 0 else 0.0
                corners.append((CENTRE[axis] + offset + (EDGE / 2 if k & bit else -EDGE / 2)) / per)
    positions = " ".join(f"{c:.9g}" for c in corners)
    groups = [_TRIANGLES[k::materials] for k in range(materials)]
    if twin is not None:
        groups.append(tuple(tuple(i + 8 for i in tri) for tri in _TRIANGLES))
        materials += 1
    names = [f' material="m{k}"' if materials > 1 else "" for k in range(materials)]
    primitives = "\n    ".join(
        f'<triangles count="{len(g)}"{name}><input semantic="VERTEX" source="#cube-vertices" offset="0"/>'
        f'<p>{" ".join(str(i) for tri in g for i in tri)}</p></triangles>' for name, g in zip(names, groups))
    return f"""<?xml version="1.0" encoding="utf-8"?>
<COLLADA xmlns="http://www.collada.org/2005/11/COLLADASchema" version="1.4.1">
  <asset>{asset_extra}<unit name="probe" meter="{meter}"/><up_axis>{up_axis}</up_axis></asset>
  <library_geometries><geometry id="cube" name="cube"><mesh>
    <source id="cube-pos"><float_array id="cube-pos-array" count="{len(corners)}">{positions}</float_array>
      <technique_common><accessor source="#cube-pos-array" count="{len(corners) // 3}" stride="3">
        <param name="X" type="float"/><param name="Y" type="float"/><param name="Z" type="float"/>
      </accessor></technique_common></source>
    <vertices id="cube-vertices"><input semantic="POSITION" source="#cube-pos"/></vertices>
    {primitives}
  </mesh></geometry></library_geometries>
  <library_visual_scenes><visual_scene id="scene" name="scene">
    <node id="cube-node" name="cube"><instance_geometry url="#cube"/></node>
  </visual_scene></library_visual_scenes>
  <scene><instance_visual_scene url="#scene"/></scene>
</COLLADA>
"""


def unit_package(root: str, files: dict[str, str]) -> str:
    """Write ``files`` {name: text} into the package ``probe`` under ``root`` (``package://probe/meshes/NAME``);
    returns ``root`` (the package directory to give)."""
    os.makedirs(os.path.join(root, "probe", "meshes"), exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(root, "probe", "meshes", name), "w", encoding="utf-8") as fh:
            fh.write(text)
    return root


def unit_urdf(name: str, scale: str | None = None) -> str:
    """The one-joint robot with ``package://probe/meshes/NAME`` as its arm's visual and collision mesh."""
    return URDF.format(name=f"package://probe/meshes/{name}", scale="" if scale is None else f' scale="{scale}"')
