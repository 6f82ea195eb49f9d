"""``solvability_reporter``: which joint reactions of the robot model are uniquely determined.

A thin node over :func:`vtm_dynamics.core.solvability.analyze_solvability` (Wojtyra & Frączek 2013).

Inputs
  ``robot_description`` (std_msgs/String, transient-local, the ROS 2 convention) or the ``urdf_path`` parameter:
  the URDF, with the vtm_dynamics extension elements (``<loop_closure>``, ``<knife_edge>``,
  ``<driving_constraint>``; see docs/urdf_extension.md).
Outputs
  ``~/report`` (vtm_msgs/SolvabilityReport, transient-local: late subscribers get the last report),
  ``/diagnostics`` (diagnostic_msgs/DiagnosticArray: OK when every reaction is unique, WARN naming the pairs whose
  reactions are not, ERROR when the model cannot be analysed).
Service
  ``~/analyze`` (vtm_msgs/AnalyzeSolvability): analyse any URDF string, independent of the robot description.

Run: ``ros2 run vtm_dynamics solvability_reporter --ros-args -p urdf_path:=urdf/parallelogram_4bar.urdf``.
"""

from __future__ import annotations

import os
import sys

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from std_msgs.msg import String

from vtm_dynamics.core.reactions.solvability import DEFAULT_RANK_RTOL, analyze_solvability
from vtm_dynamics.nodes import graph
from vtm_dynamics.nodes import params as P
from vtm_dynamics.nodes.node_main import run_node
from vtm_dynamics.nodes.solvability_io import (
    diagnostic_status,
    error_status,
    failure_message,
    report_message,
)
from vtm_msgs.msg import SolvabilityReport as SolvabilityReportMsg
from vtm_msgs.srv import AnalyzeSolvability

PARAMETERS = [
    P.ParameterSpec("urdf_path", "", "URDF file to analyse at start-up; empty: wait for the robot_description topic.",
                    P.existing_file_or_empty, read_only=True),
    P.ParameterSpec("robot_description_topic", "robot_description",
                    "Topic of the URDF text (std_msgs/String, transient-local); empty: do not subscribe.",
                    read_only=True),
    P.ParameterSpec("planar", False, "Analyse in planar absolute coordinates (x, y, phi per body) instead of spatial "
                    "ones; only for mechanisms that move in the x-y plane."),
    P.ParameterSpec("relative_tolerance", DEFAULT_RANK_RTOL, "Relative singular-value tolerance of the rank and B_X "
                    "decisions (times the largest singular value of the constraint matrix).",
                    P.in_range(1e-15, 1e-2), constraint="1e-15 <= value <= 1e-2"),
]

_ANALYSIS_ERRORS = (ValueError, KeyError, RuntimeError, IndexError)


class SolvabilityReporter(Node):
    """Publishes the solvability report of the robot description and serves analyses of any URDF."""

    def __init__(self, **kwargs) -> None:
        super().__init__("solvability_reporter", **kwargs)
        self.p = P.declare_validated(self, PARAMETERS, on_change=self._on_change)
        latched = graph.LATCHED
        self.report_pub = self.create_publisher(SolvabilityReportMsg, "~/report", latched)
        self.diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.create_service(AnalyzeSolvability, "~/analyze", self._analyze_service)
        self.urdf_text = ""
        if self.p["robot_description_topic"]:
            self.create_subscription(String, self.p["robot_description_topic"], self._on_description, latched)
        if self.p["urdf_path"]:
            with open(os.path.expanduser(self.p["urdf_path"]), encoding="utf-8") as handle:
                self._publish_for(handle.read())

    def _on_change(self, changes: dict) -> None:
        self.p.update(changes)
        if self.urdf_text and ({"planar", "relative_tolerance"} & set(changes)):
            self._publish_for(self.urdf_text)  # parameters are applied after this callback: pass them explicitly

    def _on_description(self, msg: String) -> None:
        self._publish_for(msg.data)

    def _analyze(self, urdf: str, planar: bool, rtol: float, positions=None):
        q = None if positions is None or len(positions) == 0 else list(positions)
        return analyze_solvability(urdf, planar=planar, q=q, rank_rtol=rtol)

    def _publish_for(self, urdf: str) -> None:
        """Analyse the robot description and publish the report and its diagnostics; never raises on bad input."""
        self.urdf_text = urdf
        stamp = self.get_clock().now().to_msg()
        hardware = "robot_description"
        diag = DiagnosticArray()
        diag.header.stamp = stamp
        try:
            report = self._analyze(urdf, self.p["planar"], self.p["relative_tolerance"])
        except _ANALYSIS_ERRORS as err:
            reason = f"robot_description: cannot analyse: {err}"
            self.get_logger().error(reason)
            msg = failure_message("", reason)
            diag.status = [error_status(hardware, reason)]
        else:
            msg = report_message(report)
            diag.status = [diagnostic_status(report, report.model or hardware)]
            line = f"{report.model}: rank {report.rank}, redundancy {report.redundancy}; {msg.message}"
            if report.unsolvable:
                self.get_logger().warning(line)
            else:
                self.get_logger().info(line)
        msg.header.stamp = stamp
        self.report_pub.publish(msg)
        self.diag_pub.publish(diag)

    def _analyze_service(self, request: AnalyzeSolvability.Request, response: AnalyzeSolvability.Response):
        try:
            report = self._analyze(request.urdf, request.planar, self.p["relative_tolerance"], request.positions)
        except _ANALYSIS_ERRORS as err:
            response.success = False
            response.message = str(err)
            response.report = failure_message("", str(err))
            self.get_logger().warning(f"~/analyze: {err}")
            return response
        response.report = report_message(report)
        response.report.header.stamp = self.get_clock().now().to_msg()
        response.success = True
        response.message = response.report.message
        return response


def main(args: list[str] | None = None) -> int:
    return run_node("solvability_reporter", SolvabilityReporter, (P.ParameterError, OSError), args)


if __name__ == "__main__":
    sys.exit(main())
