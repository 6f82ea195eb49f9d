"""The run-time parameter rule, without ROS: after start-up only live parameters change, each live parameter says
why a change is safe, and deletions and empty names are always refused."""

import pytest

from vtm_dynamics.nodes.parameter_policy import RuntimePolicy

POLICY = RuntimePolicy("estop_predictor", {"marker_force_scale": "drawing only"})


def test_declarations_pass_to_the_validator_and_changes_of_other_parameters_are_refused():
    assert POLICY.refusal("horizon", declared=False) is None  # its declaration at start-up
    assert POLICY.refusal("horizon", declared=True) == (
        "horizon: read-only after start-up (safety configuration: set it in the node's YAML or on the command line "
        "and restart the node)")
    assert POLICY.refusal("use_sim_time", declared=True).startswith("use_sim_time: read-only")
    assert POLICY.refusal("marker_force_scale", declared=True) is None


def test_deletions_and_empty_names_are_refused_for_every_parameter():
    assert "cannot be deleted" in POLICY.refusal("marker_force_scale", declared=True, deleting=True)
    assert "empty" in POLICY.refusal("", declared=False)
    assert "empty" in POLICY.refusal("", declared=True)


def test_a_live_parameter_needs_its_reason_and_the_table_lists_it():
    with pytest.raises(ValueError, match="needs the reason"):
        RuntimePolicy("n", {"x": " "})
    assert POLICY.table() == "| `estop_predictor` | `marker_force_scale` | drawing only |"
    assert "every parameter is read-only" in RuntimePolicy("projection_controller").table()
