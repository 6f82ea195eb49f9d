"""Property-based fuzzing of solvability_reporter, in process: ``robot_description`` texts and ``~/analyze``
requests (file paths, malformed URDF, fuzzed extension elements, bad positions) go straight to its callbacks.

Properties: no exception escapes, no callback blocks longer than ``CALLBACK_BOUND_S``; no fuzz file is opened and
no file content reaches a reply, a report, ``/diagnostics`` or a log line; a reply to a certainly-bad request is
``success=false`` naming the field; a valid request is answered with ``success=true``; during and after the
batches the node analyses the slider-crank exactly as it did before them (nothing a message said changed it).
"""

from __future__ import annotations

import pytest
import rclpy
from hypothesis import given, settings
from std_msgs.msg import String
from vtm_msgs.srv import AnalyzeSolvability

from test.fuzz import strategies as S
from test.fuzz.harness import (
    LogCapture,
    OpenRecorder,
    check_outcome,
    deliver,
    init_ros,
    surveyable,
    record_publishers,
    solvability_reporter_adapter,
)
from test.fuzz.scale import examples


class Rig:
    def __init__(self) -> None:
        from vtm_dynamics.nodes.solvability_reporter import SolvabilityReporter

        init_ros()
        self.capture = LogCapture().install()
        self.files = S.fuzz_files()
        self.opens = OpenRecorder.install(self.files["root"])
        self.node = SolvabilityReporter()
        self.a = solvability_reporter_adapter(self.node)
        self.published = record_publishers(self.node)
        self.count = 0
        self.urdf = S.slider_crank_urdf()
        first = self.a.services["analyze"](AnalyzeSolvability.Request(urdf=self.urdf))
        assert first.success, first.message
        self.baseline = (first.report.rank, first.report.redundancy, first.message)

    def published_text(self, since: int) -> str:
        return "\n".join(repr(m) for _, m in self.published[since:])

    def close(self) -> None:
        self.capture.uninstall()
        self.node.destroy_node()
        rclpy.try_shutdown()  # later modules call rclpy.init() themselves


@pytest.fixture(scope="module")
def rig():
    r = Rig()
    yield r
    r.close()


def check_slider_crank(rig: Rig, context: str) -> None:
    res = rig.a.services["analyze"](AnalyzeSolvability.Request(urdf=rig.urdf))
    assert res.success, f"{context}: the slider-crank is no longer analysed: {res.message}"
    got = (res.report.rank, res.report.redundancy, res.message)
    assert got == rig.baseline, f"{context}: slider-crank analysed as {got}, before the fuzz {rig.baseline}"


@settings(max_examples=examples(150))
@given(S.analyze_requests(base_urdf=S.slider_crank_urdf()))
@surveyable
def test_analyze_service(rig, case):
    rig.a.reset_log_limits()
    context = f"analyze ({case.note})"
    with rig.opens.watching() as opened:
        out = deliver(rig.a, rig.capture, rig.a.services["analyze"], case.msg)
    assert not opened, f"{context} opened {opened}"
    check_outcome(rig.a, "analyze", out, False, case.note)
    res = out.value
    assert res is not None, f"{context}: no response"
    texts = [res.message, res.report.message] + [x.text for x in out.lines]
    assert not any(S.SECRET in t for t in texts), f"{context}: file content in the reply or log: {texts}"
    if case.bad:
        assert not res.success, f"{context}: a bad request was answered with success"
        assert any(f in res.message for f in case.fields), \
            f"{context}: reply {res.message!r} names none of the bad fields {case.fields}"
    elif case.bad is False:
        assert res.success, f"{context}: a valid request failed: {res.message}"
    rig.count += 1
    if rig.count % 25 == 0:
        check_slider_crank(rig, context)


@settings(max_examples=examples(80))
@given(S.urdf_texts(base_urdf=S.slider_crank_urdf(), extension=True, max_links=12))
@surveyable
def test_robot_description(rig, case):
    rig.a.reset_log_limits()
    context = f"robot_description ({case.note})"
    mark = len(rig.published)
    with rig.opens.watching() as opened:
        out = deliver(rig.a, rig.capture, rig.a.inputs["robot_description"], case.msg)
    assert not opened, f"{context} opened {opened}"
    # a description that cannot be analysed is reported once; one that can is reported at info level
    unusable = case.fields[0] in S.UNUSABLE_URDF_KINDS
    check_outcome(rig.a, "robot_description", out, unusable, case.note)
    leaked = [x.text for x in out.lines if S.SECRET in x.text] or (S.SECRET in rig.published_text(mark))
    assert not leaked, f"{context}: file content in a log line, the report or /diagnostics"


def test_still_analyses_after_the_fuzz_batches(rig):
    check_slider_crank(rig, "all fuzz batches of this module")
    rig.a.inputs["robot_description"](String(data=rig.urdf))
    assert S.SECRET not in rig.capture.all_text(), "a fuzz file's content reached the log"
