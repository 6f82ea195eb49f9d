"""A stranger on the domain: from its own process, over DDS, it calls the standard parameter services of the given
nodes (what ``ros2 param set`` / ``ros2 param delete`` / ``ros2 param load`` do) with every parameter the node
lists, each with hostile values of its own type, a value of another type and a deletion, one request per value,
then all changes of a node at once (``set_parameters_atomically``). One JSON line per request on stdout.

Run: ``python -m test.nodes.parameter_attacker /estop_predictor /projection_controller ...``
"""

from __future__ import annotations

import json
import sys
import time

import rclpy
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.srv import GetParameters, ListParameters, SetParameters, SetParametersAtomically

from vtm_dynamics.nodes.fastdds_profile import rcl_init_environment

WAIT = 20.0  # [s] for a node's services to be discovered


def _value(kind: int, value) -> ParameterValue:
    v = ParameterValue(type=kind)
    field = {ParameterType.PARAMETER_BOOL: "bool_value", ParameterType.PARAMETER_INTEGER: "integer_value",
             ParameterType.PARAMETER_DOUBLE: "double_value", ParameterType.PARAMETER_STRING: "string_value",
             ParameterType.PARAMETER_BOOL_ARRAY: "bool_array_value",
             ParameterType.PARAMETER_INTEGER_ARRAY: "integer_array_value",
             ParameterType.PARAMETER_DOUBLE_ARRAY: "double_array_value",
             ParameterType.PARAMETER_STRING_ARRAY: "string_array_value"}.get(kind)
    if field is not None:
        setattr(v, field, value)
    return v


def hostile_values(current: ParameterValue) -> list[tuple[str, ParameterValue]]:
    """(label, value) pairs: changes an attacker would try for a parameter whose current value is ``current``."""
    t = current.type
    out: list[tuple[str, ParameterValue]] = []
    if t == ParameterType.PARAMETER_BOOL:
        out.append(("flipped", _value(t, not current.bool_value)))
    elif t == ParameterType.PARAMETER_INTEGER:
        x = current.integer_value
        out += [("larger", _value(t, x * 10 + 1)), ("zero", _value(t, 0)), ("huge", _value(t, 2 ** 40))]
    elif t == ParameterType.PARAMETER_DOUBLE:
        x = current.double_value
        out += [("larger", _value(t, x * 10 + 1.0)), ("zero", _value(t, 0.0)), ("huge", _value(t, 1e9))]
    elif t == ParameterType.PARAMETER_STRING:
        out += [("file", _value(t, "/etc/hostname")), ("other", _value(t, current.string_value + "x"))]
    elif t in (ParameterType.PARAMETER_STRING_ARRAY, ParameterType.PARAMETER_DOUBLE_ARRAY,
               ParameterType.PARAMETER_INTEGER_ARRAY, ParameterType.PARAMETER_BOOL_ARRAY):
        out += [("empty", _value(t, [])), ("one", _value(ParameterType.PARAMETER_STRING_ARRAY, ["x"]))]
    out.append(("other type", _value(ParameterType.PARAMETER_STRING, "1") if t != ParameterType.PARAMETER_STRING
                else _value(ParameterType.PARAMETER_DOUBLE, 1.0)))
    out.append(("delete", ParameterValue(type=ParameterType.PARAMETER_NOT_SET)))
    return out


def _call(node, client, request, timeout: float = 10.0):
    future = client.call_async(request)
    rclpy.spin_until_future_complete(node, future, timeout_sec=timeout)
    if not future.done():
        raise TimeoutError(f"{client.srv_name}: no answer within {timeout} s")
    return future.result()


def attack(node, target: str) -> list[dict]:
    lister = node.create_client(ListParameters, f"{target}/list_parameters")
    getter = node.create_client(GetParameters, f"{target}/get_parameters")
    setter = node.create_client(SetParameters, f"{target}/set_parameters")
    atomic = node.create_client(SetParametersAtomically, f"{target}/set_parameters_atomically")
    deadline = time.monotonic() + WAIT
    for client in (lister, getter, setter, atomic):
        if not client.wait_for_service(timeout_sec=max(0.1, deadline - time.monotonic())):
            return [{"node": target, "error": f"{client.srv_name} not found"}]
    names = list(_call(node, lister, ListParameters.Request()).result.names)
    rows: list[dict] = []
    everything = []
    for name in names:
        got = _call(node, getter, GetParameters.Request(names=[name])).values  # empty: declared without a value
        current = got[0] if got else _value(ParameterType.PARAMETER_STRING_ARRAY, [])
        for label, value in hostile_values(current):
            result = _call(node, setter, SetParameters.Request(parameters=[ParameterMsg(name=name, value=value)]))
            r = result.results[0]
            rows.append({"node": target, "name": name, "value": label, "successful": bool(r.successful),
                         "reason": r.reason})
            if label not in ("delete", "other type"):
                everything.append(ParameterMsg(name=name, value=value))
    for label, value in (("empty name", _value(ParameterType.PARAMETER_DOUBLE, 1.0)),
                         ("empty name, empty list", _value(ParameterType.PARAMETER_STRING_ARRAY, []))):
        r = _call(node, setter, SetParameters.Request(parameters=[ParameterMsg(name="", value=value)])).results[0]
        rows.append({"node": target, "name": "", "value": label, "successful": bool(r.successful),
                     "reason": r.reason})
    r = _call(node, atomic, SetParametersAtomically.Request(parameters=everything)).result
    rows.append({"node": target, "name": "*", "value": "all at once", "successful": bool(r.successful),
                 "reason": r.reason})
    return rows


def main(targets: list[str]) -> int:
    with rcl_init_environment():  # loopback sockets only, as every process of the project
        rclpy.init()
    node = rclpy.create_node("parameter_stranger")
    try:
        for target in targets:
            for row in attack(node, target):
                print(json.dumps(row), flush=True)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
