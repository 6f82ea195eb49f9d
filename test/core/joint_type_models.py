"""Robots whose joints are not all revolute, built from the UR5 of example-robot-data by editing its URDF text:
a joint declared ``continuous`` (no limits; Pinocchio stores its angle as (cos, sin), nq != nv) and the UR5 on a
braked linear track (a prismatic joint from the world to a 50 kg carriage carrying the arm's base)."""

from __future__ import annotations

from vtm_dynamics.core.robot.model import example_robot_urdf

UR5_URDF = "ur_description/urdf/ur5_robot.urdf"

#: the track's brake: 800 N sliding, 1200 N holding, 30 N s/m viscous, 4 kg reflected drive inertia, 10 ms delay
TRACK_BRAKE = {"engage_delay": 0.01, "rise_time": 0.005, "sliding_torque": 800.0, "holding_torque": 1200.0,
               "viscous": 30.0, "armature": 4.0}


def ur5_text() -> str:
    with open(example_robot_urdf(UR5_URDF), encoding="utf-8") as fh:
        return fh.read()


def with_continuous(text: str, *joints: str) -> str:
    """The URDF ``text`` with the named revolute joints declared continuous (their limits are then ignored)."""
    for name in joints:
        tag = f'<joint name="{name}" type="revolute">'
        assert tag in text, name
        text = text.replace(tag, f'<joint name="{name}" type="continuous">')
    return text


def on_track(text: str, axis: str = "1 0 0", carriage_mass: float = 50.0, travel: float = 2.0,
             speed: float = 2.0) -> str:
    """The UR5 URDF ``text`` mounted on a prismatic ``track_joint`` (axis ``axis`` in the world, +-``travel`` [m],
    ``speed`` [m/s] limit) driving a ``carriage`` of ``carriage_mass`` [kg]; the arm's base sits 0.1 m above it."""
    start = text.index('<joint name="world_joint"')
    end = text.index("</joint>", start) + len("</joint>")
    track = f"""<link name="carriage">
    <inertial><origin xyz="0 0 0.05" rpy="0 0 0"/><mass value="{carriage_mass}"/>
      <inertia ixx="0.6" ixy="0" ixz="0" iyy="1.2" iyz="0" izz="1.5"/></inertial>
  </link>
  <joint name="track_joint" type="prismatic">
    <parent link="world"/><child link="carriage"/><origin xyz="0 0 0" rpy="0 0 0"/>
    <axis xyz="{axis}"/><limit effort="2000" lower="{-travel}" upper="{travel}" velocity="{speed}"/>
  </joint>
  <joint name="carriage_joint" type="fixed">
    <parent link="carriage"/><child link="base_link"/><origin xyz="0 0 0.1" rpy="0 0 0"/>
  </joint>"""
    return text[:start] + track + text[end:]


def write_track_robot(folder, brake_file: str) -> tuple[str, str]:
    """The UR5 on a braked linear track (:func:`on_track`, :data:`TRACK_BRAKE`) written as files in ``folder``:
    (the URDF's path, the brake file's: ``brake_file``'s brakes plus the track's)."""
    import os

    import yaml

    urdf, brakes = os.path.join(folder, "track.urdf"), os.path.join(folder, "brakes.yaml")
    with open(urdf, "w", encoding="utf-8") as fh:
        fh.write(on_track(ur5_text()))
    with open(brake_file, encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    config["brakes"]["joints"]["track_joint"] = dict(TRACK_BRAKE)
    with open(brakes, "w", encoding="utf-8") as fh:
        fh.write(yaml.safe_dump(config))
    return urdf, brakes
