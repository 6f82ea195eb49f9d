"""The one /diagnostics builder of the nodes (nodes/diagnostics.py)."""

import math

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticStatus

from vtm_dynamics.nodes import diagnostics


def test_levels_are_the_message_bytes_and_values_are_text_in_one_format():
    status = diagnostics.status("node: check", diagnostics.WARN, "saturated",
                                {"ok": True, "gain": 0.1, "nan": math.nan, "text": "1.50", "count": 3},
                                hardware_id="ur5")
    assert status.level == DiagnosticStatus.WARN and status.hardware_id == "ur5" and status.name == "node: check"
    assert {kv.key: kv.value for kv in status.values} == {"ok": "true", "gain": "0.1", "nan": "nan", "text": "1.50",
                                                         "count": "3"}
    assert diagnostics.status("n", diagnostics.OK, "x").level == DiagnosticStatus.OK
    assert diagnostics.status("n", diagnostics.ERROR, "x").level == DiagnosticStatus.ERROR


def test_the_message_is_cut_and_the_array_carries_the_stamp():
    assert len(diagnostics.status("n", diagnostics.OK, "x" * 5000).message) == diagnostics.MAX_MESSAGE
    assert len(diagnostics.status("n", diagnostics.OK, "x" * 500, limit=300).message) == 300
    stamp = Time(sec=12, nanosec=5)
    array = diagnostics.diagnostic_array(stamp, diagnostics.status("a", 0, ""), diagnostics.status("b", 1, ""))
    assert array.header.stamp == stamp and [s.name for s in array.status] == ["a", "b"]
