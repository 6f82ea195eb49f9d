"""Brake YAML files are parsed with size, depth and node limits: every failure is one BrakeConfigError line."""

from __future__ import annotations

import os
import time

import pytest

from core_testdata import REPO
from vtm_dynamics.core.estop.brakes import BrakeConfigError, brakes_from_config, load_brake_yaml

VALID = "brakes:\n  joints:\n    joint1: {sliding_torque: 10.0, holding_torque: 12.0, engage_delay: 0.01}\n"


def _one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message and len(message) < 300, message
    return message


@pytest.mark.parametrize("nested", ["[" * 1000 + "]" * 1000, "{a: " * 1000 + "1" + "}" * 1000,
                                    "".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "x: 1\n"],
                         ids=["flow_sequences", "flow_mappings", "block_mappings"])
def test_a_deeply_nested_file_is_one_brake_config_error(tmp_path, nested):
    path = tmp_path / "nested.yaml"
    path.write_text(nested)
    with pytest.raises(BrakeConfigError) as err:
        load_brake_yaml(str(path))
    assert "nested deeper" in _one_line(err)


def test_a_ten_megabyte_file_is_refused_before_parsing(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(VALID + "#" + "x" * 10_000_000 + "\n")
    t0 = time.perf_counter()
    with pytest.raises(BrakeConfigError) as err:
        load_brake_yaml(str(path))
    assert "bytes" in _one_line(err)
    assert time.perf_counter() - t0 < 2.0


def test_the_shipped_files_still_load(planar_3r):
    data = load_brake_yaml(os.path.join(REPO, "config", "planar_3r_brakes.yaml"))
    assert brakes_from_config(planar_3r, data).braked.any()
    assert load_brake_yaml(os.path.join(REPO, "config", "ur5_brakes.yaml"))["brakes"]["joints"]


def test_long_values_are_not_echoed_at_length(planar_3r):
    with pytest.raises(BrakeConfigError) as err:
        brakes_from_config(planar_3r, {"brakes": {"joints": {"joint1": {"sliding_torque": "x" * 50_000}}}})
    assert "sliding_torque" in _one_line(err)
