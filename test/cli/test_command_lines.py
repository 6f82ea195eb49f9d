"""What every command line of the suite promises: one-line usage errors (status 2), every option with help and its
default shown, no reStructuredText markup in the help, robot names in any case, files named by their full path,
and ``--help`` without importing the numerical libraries."""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys

import pytest

from test.ros_helpers import REPO_ROOT, ros_subprocess_env
from vtm_dynamics.cli.arguments import EXIT_OUTPUT_CLOSED

# console entry point -> module (setup.py); the node executables are tested with the nodes
TOOLS = {
    "vtm-predict": "vtm_dynamics.cli.predict",
    "vtm-solvability": "vtm_dynamics.cli.solvability",
    "vtm-reactions": "vtm_dynamics.cli.reactions",
    "vtm-stopping-data": "vtm_dynamics.cli.stopping_data",
    "vtm-stopping-map": "vtm_dynamics.cli.stopping_map",
    "vtm-calibrate": "vtm_dynamics.cli.calibrate",
    "vtm-record": "vtm_dynamics.cli.record",
    "vtm-estop-demo": "vtm_dynamics.cli.estop_demo",
    "vtm-check-trajectory": "vtm_dynamics.cli.check_trajectory",
    "vtm-safety-distance": "vtm_dynamics.cli.safety_distance",
}
HEAVY = ("pinocchio", "scipy", "matplotlib", "coal", "dask", "pyarrow", "rclpy")


def test_setup_lists_exactly_these_tools():
    with open(os.path.join(REPO_ROOT, "setup.py"), encoding="utf-8") as fh:
        text = fh.read()
    for prog, module in TOOLS.items():
        assert f'"{prog} = {module}:main"' in text, prog


def _parser(module: str) -> argparse.ArgumentParser:
    mod = importlib.import_module(module)
    if hasattr(mod, "build_parser"):
        return mod.build_parser()
    raise AssertionError(f"{module} has no build_parser()")


@pytest.mark.parametrize("prog, module", TOOLS.items())
def test_a_usage_error_is_one_line_with_status_2(prog, module, capsys):
    main = importlib.import_module(module).main
    for argv in (["--no-such-option"], ["--help-me-please", "x"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"{prog}: error: "), err


@pytest.mark.parametrize("prog, module", TOOLS.items())
def test_every_option_has_help_the_defaults_are_shown_and_no_markup(prog, module):
    parser = _parser(module)
    assert parser.prog == prog
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help and action.help.strip(), f"{prog} {action.option_strings or action.dest}: no help"
    text = parser.format_help()
    assert "``" not in text and ":mod:" not in text and ":func:" not in text, text
    for action in parser._actions:
        default = action.default
        if action.option_strings and default not in (None, False, argparse.SUPPRESS, []) and \
                not isinstance(action, argparse._HelpAction):
            entry = parser._get_formatter()._format_action(action)
            assert "default" in " ".join(entry.split()).lower(), f"{prog} {action.option_strings}: default not shown"


@pytest.mark.parametrize("prog, module", TOOLS.items())
def test_help_and_usage_errors_do_not_import_the_numerical_libraries(prog, module):
    """--help took 2-5 s (Pinocchio, scipy, matplotlib imported with the module); building the parser needs none."""
    code = (f"import sys, {module} as m; m.build_parser().format_help(); "
            f"print(sorted(n for n in {HEAVY!r} if n in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=ros_subprocess_env(), cwd=REPO_ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = out.stdout.strip().splitlines()[-1]
    allowed = {  # the parser needs a list that lives next to the heavy code (until the robot catalogue)
        "vtm-calibrate": "['coal', 'pinocchio', 'scipy']",  # the identification's fields (core.estop)
        "vtm-estop-demo": "['coal', 'pinocchio']",  # the nodes' robot names (nodes.model_source)
    }
    assert loaded == allowed.get(prog, "[]"), f"{prog}: --help imports {loaded}"


@pytest.mark.parametrize("module, argv", [
    ("vtm_dynamics.cli.predict", ["UR5", "--help"]),
    ("vtm_dynamics.cli.stopping_data", ["UR3", "--out", "x", "--help"]),
    ("vtm_dynamics.cli.stopping_map", ["Ur5", "--out", "x", "--help"]),
])
def test_robot_names_are_taken_in_any_case(module, argv, capsys):
    args = importlib.import_module(module).build_parser().parse_args([a for a in argv if a != "--help"])
    assert args.robot == argv[0].lower()


def test_an_unknown_robot_name_is_refused_with_the_closest_known(capsys):
    from vtm_dynamics.cli.predict import main

    assert main(["ur55"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown robot 'ur55'" in err and "did you mean 'ur5'" in err


def test_a_file_is_named_by_its_full_path_and_a_text_file_is_not_called_a_path(tmp_path, monkeypatch, capsys):
    from vtm_dynamics.cli.predict import main as predict
    from vtm_dynamics.cli.solvability import main as solvability

    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("not a robot\n")
    assert solvability(["notes.txt"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'notes.txt'} is not a URDF file" in err and "paths are not accepted" not in err, err
    assert solvability(["missing.urdf"]) == 2
    assert f"cannot read {tmp_path / 'missing.urdf'}:" in capsys.readouterr().err
    urdf = os.path.join(REPO_ROOT, "urdf", "planar_3r.urdf")
    assert predict(["--urdf", urdf, "--brakes", "nope.yaml"]) == 2
    assert f"brakes: file not found: '{tmp_path / 'nope.yaml'}'" in capsys.readouterr().err


def test_files_written_through_a_rename_keep_the_usual_mode(tmp_path):
    """The brake YAML and reports of vtm-calibrate were 0600 (mkstemp's mode kept through the rename)."""
    import stat

    from vtm_dynamics.cli.stop_report import write_atomic

    old = os.umask(0o022)
    try:
        path = write_atomic(str(tmp_path / "fitted.yaml"), "brakes: {}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644



@pytest.mark.parametrize("module, argv", [
    ("vtm_dynamics.cli.predict", ["planar_3r"]),
    ("vtm_dynamics.cli.solvability", [os.path.join(REPO_ROOT, "urdf", "parallelogram_4bar.urdf"), "--planar"]),
])
def test_output_into_a_closed_pipe_ends_quietly(module, argv):
    # `vtm-predict planar_3r | head -3` ended in a BrokenPipeError trace; here the reader is gone before the tool starts
    read, write = os.pipe()
    os.close(read)
    try:
        out = subprocess.run([sys.executable, "-c", f"import sys, {module} as m; sys.exit(m.main({argv!r}))"],
                             stdout=write, stderr=subprocess.PIPE, text=True, timeout=120, env=ros_subprocess_env(),
                             cwd=REPO_ROOT)
    finally:
        os.close(write)
    assert out.stderr == "", out.stderr[-2000:]
    assert out.returncode == EXIT_OUTPUT_CLOSED


@pytest.mark.parametrize("prog, module", TOOLS.items())
def test_every_tool_ends_quietly_when_its_output_is_closed(prog, module):
    main = importlib.import_module(module).main
    assert getattr(main, "__wrapped__", None) is not None and main.__name__ == "main", prog
