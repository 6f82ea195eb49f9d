"""Bad input on large models gives one clear line, before memory grows with the model (run in a child process
so that its peak memory is its own)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from test.ros_helpers import REPO_ROOT
from vtm_dynamics.core.reactions.mechanism_families import comb_urdf

CHILD = r"""
import json, resource, sys, time
from vtm_dynamics.core.reactions.mechanism_families import comb_urdf
from vtm_dynamics.core.reactions.solvability import analyze_solvability
case, max_bodies = sys.argv[1], int(sys.argv[2])
text = comb_urdf(int(sys.argv[3]))
if case == "missing_link":
    text = text.replace('<child link="crank_1"/><origin xyz="0.1 0 0"/><child_origin',
                        '<child link="crank_nowhere"/><origin xyz="0.1 0 0"/><child_origin')
elif case == "disconnected":
    text = text.replace("</robot>", '<link name="loose_part"/></robot>')
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
try:
    analyze_solvability(text, planar=True, max_bodies=max_bodies)
    out = {"error": None}
except ValueError as err:
    out = {"error": str(err)}
out["seconds"] = time.perf_counter() - t0
out["grew_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
out["text_kb"] = len(text) // 1024
print(json.dumps(out))
"""


def _run(case: str, max_bodies: int, cranks: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, case, str(max_bodies), str(cranks)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_50000_link_urdf_is_refused_before_parsing_by_the_size_max_bodies_allows():
    # default max_bodies (50): 25 MB of text is refused by its length before any parse, naming the cap to raise
    out = _run("plain", 50, 50_000)
    assert out["error"].startswith("urdf: ") and "exceed what max_bodies = 50 allows" in out["error"], out
    assert "\n" not in out["error"] and len(out["error"]) < 200
    assert out["grew_kb"] < 3 * out["text_kb"] + 50_000  # a few times the text, nothing model-sized


def test_a_50000_link_urdf_with_a_raised_cap_is_refused_by_the_link_count_while_parsing():
    # max_bodies = 10,000 allows 40 MB of text (URDF_BYTES_PER_BODY): the 25 MB, 50,001-link text passes that,
    # and the link count, checked while parsing, stops at link 10,002
    out = _run("plain", 10_000, 50_000)
    assert "max_bodies = 10000" in out["error"] and "\n" not in out["error"], out
    assert out["grew_kb"] < 3 * out["text_kb"] + 50_000


@pytest.mark.parametrize("case, words", [
    ("missing_link", "<loop_closure name='A1'>: link 'crank_nowhere' does not exist in the URDF"),
    ("disconnected", "URDF must have exactly one root link, found 2"),
])
def test_bad_structure_of_a_large_model_is_one_line(case, words):
    out = _run(case, 2_000, 1_500)
    assert out["error"] is not None and words in out["error"], out
    assert "\n" not in out["error"] and len(out["error"]) < 200
    assert out["seconds"] < 60


def test_the_comb_generator_names_the_loop_it_is_asked_for():
    assert '<loop_closure name="A1" type="revolute"><parent link="coupler"/><child link="crank_1"/>' in comb_urdf(3)


def test_a_deep_chain_is_refused_before_the_urdf_parser_crashes():
    # A 5,000-joint chain crashed the process inside Pinocchio's URDF parser (SIGSEGV: no handler can catch it).
    from vtm_dynamics.core.reactions.solvability import MAX_TREE_DEPTH, analyze_solvability

    links = "".join(f'<link name="l{i}"/><joint name="j{i}" type="revolute"><parent link="l{i - 1}"/>'
                    f'<child link="l{i}"/><axis xyz="0 0 1"/></joint>' for i in range(1, 5001))
    text = f'<robot name="chain"><link name="l0"/>{links}</robot>'
    with pytest.raises(ValueError, match=f"more than {MAX_TREE_DEPTH} joints deep"):
        analyze_solvability(text, max_bodies=6000)
