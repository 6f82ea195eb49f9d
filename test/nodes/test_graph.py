"""Shared graph conventions: discovery stays on this machine, logs are limited per message, callbacks survive."""

from __future__ import annotations

from vtm_dynamics.nodes.graph import LogLimiter, TokenBucket, apply_isolation_defaults, guarded, sensor_qos
from rclpy.qos import ReliabilityPolicy


class _Logger:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def error(self, text: str) -> None:
        self.lines.append(("error", text))

    def warning(self, text: str) -> None:
        self.lines.append(("warning", text))

    def info(self, text: str) -> None:
        self.lines.append(("info", text))


def test_unset_or_empty_discovery_range_means_localhost_not_subnet():
    for env in ({}, {"ROS_AUTOMATIC_DISCOVERY_RANGE": ""}, {"ROS_AUTOMATIC_DISCOVERY_RANGE": "  "}):
        assert apply_isolation_defaults(env) == []
        assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"


def test_unknown_discovery_range_becomes_localhost_with_a_warning():
    env = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "EVERYWHERE"}
    warnings = apply_isolation_defaults(env)
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert len(warnings) == 1 and "EVERYWHERE" in warnings[0]


def test_a_deliberate_subnet_is_kept_and_warned_about():
    env = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"}
    warnings = apply_isolation_defaults(env)
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SUBNET" and len(warnings) == 1


def test_log_limiter_keys_on_the_message_so_a_different_error_on_the_same_field_is_logged():
    logger, now = _Logger(), [0.0]
    log = LogLimiter(logger, period=5.0, clock=lambda: now[0])
    assert log("warning", "joint_states.position: NaN")
    assert not log("warning", "joint_states.position: NaN")
    assert log("warning", "joint_states.position: 3 values for 6 names")
    now[0] = 6.0
    assert log("warning", "joint_states.position: NaN")
    assert [t for _, t in logger.lines] == [
        "joint_states.position: NaN", "joint_states.position: 3 values for 6 names",
        "joint_states.position: NaN (1 identical messages suppressed)"]


def test_token_bucket_refuses_beyond_the_burst_and_refills_at_the_rate():
    now = [0.0]
    bucket = TokenBucket(rate=10.0, burst=2, clock=lambda: now[0])
    assert [bucket.allow() for _ in range(3)] == [True, True, False]
    now[0] = 0.1
    assert bucket.allow() and not bucket.allow()
    assert bucket.refused == 2


def test_guarded_callback_reports_one_line_and_keeps_going():
    logger = _Logger()
    log = LogLimiter(logger)

    @guarded(log, "estop")
    def deep(_msg):
        raise RecursionError("maximum recursion depth exceeded\nwhile parsing")

    assert deep(object()) is None
    assert logger.lines == [("error", "estop: unexpected RecursionError: maximum recursion depth exceeded while parsing")]


def test_guarded_service_returns_a_failed_response():
    class Response:
        success = True
        message = ""

    @guarded(LogLimiter(_Logger()), "predict_stop", default="response")
    def serve(_request, response):
        raise MemoryError("too big")

    response = serve(object(), Response())
    assert response.success is False and "MemoryError" in response.message


def test_joint_state_subscription_is_best_effort_so_both_publisher_kinds_match():
    assert sensor_qos().reliability == ReliabilityPolicy.BEST_EFFORT


def test_guarded_async_service_returns_a_failed_response_instead_of_a_coroutine():
    import asyncio

    class Response:
        success = True
        message = ""

    @guarded(LogLimiter(_Logger()), "analyze", default="response")
    async def serve(_request, response):
        await asyncio.sleep(0)
        raise RecursionError("deep")

    response = asyncio.run(serve(object(), Response()))
    assert response.success is False and "RecursionError" in response.message
