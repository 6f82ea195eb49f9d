"""What produced a prediction's figures (``vtm-predict``): robot and model hash, brake file and hash, payload, stop
category and its parameters, integration settings, the envelope's ranges, the start state and the software, as
JSON-ready data, as the summary's header lines and as a plot's foot line (:mod:`vtm_dynamics.cli.provenance`)."""

from __future__ import annotations

import os

from vtm_dynamics.cli import provenance
from vtm_dynamics.core.estop.defaults import CATEGORY1_LONGEST_RAMP
from vtm_dynamics.core.estop.inputs import torque_limits_text


def prediction_inputs(robot_label: str, robot, brakes_path: str, *, payload: float,
                      payload_frame: str | None, tcp_frame: str | None, category: int, deceleration: float,
                      max_duration: float | None, settings, envelope: dict | None, q0, v0,
                      torque_limits: str | tuple[float, ...] | None = None) -> dict:
    """Everything that determines a prediction, as JSON-ready data (SI units in the keys): robot and the sha256 of
    its URDF text, brake file (absolute path) and its sha256, payload, stop category with its parameters, the
    integration settings, the envelope's ranges, the start state and the software (version, git commit)."""
    brake_file = os.path.abspath(brakes_path)
    return {
        "robot": robot_label, "model_name": robot.name, "model_sha256": provenance.text_sha256(robot.urdf_text or ""),
        "brakes_file": brake_file, "brakes_sha256": provenance.file_sha256(brake_file),
        "payload_kg": float(payload), "payload_frame": payload_frame if payload else None, "tcp_frame": tcp_frame,
        "category": int(category),
        "category1": ({"deceleration_rad_s2": float(deceleration), "max_duration_s": max_duration,
                       "torque_limits": list(torque_limits) if isinstance(torque_limits, tuple) else torque_limits,
                       "longest_ramp_s": CATEGORY1_LONGEST_RAMP if torque_limits is not None else None,
                       "source": "assumed: --decel (a straight joint-space ramp at this limit, then power off)"}
                      if category == 1 else None),
        "integration": {"method": settings.method, "max_step_s": settings.step, "horizon_s": settings.t_max},
        "envelope": envelope, "q0": [float(x) for x in q0], "v0": [float(x) for x in v0],
        "software": provenance.software(),
    }


def inputs_lines(inputs: dict) -> list[str]:
    """The inputs as the summary's header lines (what produced the figures below them)."""
    c1 = inputs.get("category1")
    lines = [
        f"model            {inputs['model_name']!r}, URDF sha256 {inputs['model_sha256'][:16]}",
        f"brakes           {inputs['brakes_file']} (sha256 {inputs['brakes_sha256'][:16]})",
        f"payload          {inputs['payload_kg']:g} kg" + (f" at {inputs['payload_frame']}" if inputs['payload_kg'] else ""),
        f"category         {inputs['category']}" + (
            f": ramp at {c1['deceleration_rad_s2']:g} rad/s^2 (assumed, --decel), power off at standstill"
            + (f" or after {c1['max_duration_s']:g} s" if c1["max_duration_s"] is not None else "")
            + ("; drive torques within " + torque_limits_text(c1["torque_limits"])
               + f", ramp at most {c1['longest_ramp_s']:g} s" if c1.get("torque_limits") else "")
            if c1 else ": brakes engage after their delay, no drive torque"),
        f"integration      {inputs['integration']['method']}, max step {inputs['integration']['max_step_s']:g} s, "
        f"horizon {inputs['integration']['horizon_s']:g} s",
    ]
    env = inputs.get("envelope")
    if env:
        lines.append(f"envelope ranges  brake torque x {env['torque_factor'][0]:g}-{env['torque_factor'][1]:g}, "
                     f"engage delay x {env['delay_factor'][0]:g}-{env['delay_factor'][1]:g}, payload "
                     f"{env['payload_kg'][0]:g}-{env['payload_kg'][1]:g} kg"
                     + (f" at {env['payload_frame']}" if env.get("payload_frame") else "")
                     + f", {env['n_random']} random cases + corners")
    sw = inputs["software"]
    lines.append(f"software         {sw['name']} {sw['version']}"
                 + (f" (git {sw['git_commit']})" if sw["git_commit"] else " (not from a git tree)"))
    return lines


def plot_source(inputs: dict) -> str:
    """One line for a plot's foot: robot, model and brake hashes, payload, category, software."""
    sw = inputs["software"]
    return (f"{inputs['robot']} (URDF {inputs['model_sha256'][:10]}), brakes {os.path.basename(inputs['brakes_file'])}"
            f" ({inputs['brakes_sha256'][:10]}), payload {inputs['payload_kg']:g} kg, category {inputs['category']}"
            + (f" at {inputs['category1']['deceleration_rad_s2']:g} rad/s^2" if inputs["category1"] else "")
            + f", step {inputs['integration']['max_step_s']:g} s; {sw['name']} {sw['version']}"
            + (f" {sw['git_commit']}" if sw["git_commit"] else ""))
