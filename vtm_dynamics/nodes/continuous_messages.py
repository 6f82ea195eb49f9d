"""The messages of a continuous prediction, built and serialized where the prediction is made (the prediction
process), so that the node process only stamps the input's age into them and publishes the bytes. No node, no
executor: message types and their CDR serialization only.

Why: with the predictions in their own process (``prediction_process``), building the continuous
``StopPrediction``, its trajectory and its joint reactions was most of what a continuous round still did in the
node process (about 1-1.5 ms per round), holding the interpreter lock the E-stop path needs. Built here, the node
process keeps about a tenth of that.

The one value that is not known where the messages are built is ``start_state_age``: the age of the input state
*at publication* (``live_freshness``). It is written into the serialized ``StopPrediction`` at publication, at the
byte offset found when it was built (the message serialized with a marker value in that field; the marker must
occur exactly once, or the offset is not used and the node builds the message itself). Everything else is what
``prediction_io.stop_prediction_message`` and ``mark_provenance`` make in the node.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from rclpy.serialization import deserialize_message, serialize_message
from vtm_msgs.msg import StopPrediction

from vtm_dynamics.nodes import prediction_io as io
from vtm_dynamics.nodes.conversions import exact_stamp

_DOUBLE = struct.Struct("<d")
#: a value no real age has (about -1.5e9 s), written where the age goes to find its bytes; its bytes were chosen
#: to look like nothing a message holds (no zero byte: a count or padding does not match part of it)
_AGE_MARKER = _DOUBLE.unpack(b"\x9f\x4a\x17\xe3\x5c\x2b\xd6\xc1")[0]
_CDR_LITTLE_ENDIAN = (b"\x00\x01", b"\x00\x03")  # encapsulation: CDR_LE, PL_CDR_LE


@dataclass(frozen=True)
class MessageRequest:
    """What the node knows at the start of a round: the input ``stamp`` [s] and its exact ``header_stamp`` (or
    None), the ``frame``, the stop ``category``, the trajectory's ``max_points``, the model's ``name`` and
    ``hash`` and whether the input's velocities were ``estimated``."""

    stamp: float
    header_stamp: Any
    frame: str
    category: int
    max_points: int
    model_name: str
    model_hash: str
    estimated: bool


@dataclass(frozen=True)
class SerializedMessages:
    """The CDR bytes of the continuous ``prediction`` (``success=true``; its ``start_state_age`` at ``age_at``),
    of its ``trajectory`` and of the ``reactions``."""

    prediction: bytes
    age_at: int
    trajectory: bytes
    reactions: bytes

    def prediction_with_age(self, age: float) -> bytes:
        """The prediction's bytes with ``start_state_age`` = ``age`` [s]."""
        data = bytearray(self.prediction)
        _DOUBLE.pack_into(data, self.age_at, float(age))
        return bytes(data)


def serialized_messages(robot: Any, result: Any, request: MessageRequest) -> SerializedMessages | None:
    """The messages of ``result`` (a core StopPrediction for ``robot``) serialized; None when the age's place
    cannot be found (the node then builds them itself)."""
    stamp = exact_stamp(request.header_stamp, request.stamp)
    pred = io.stop_prediction_message(robot, result, stamp, request.frame, "continuous", request.category,
                                      request.max_points)
    io.mark_provenance(pred, model_name=request.model_name, model_hash=request.model_hash,
                       start_stamp=request.header_stamp or request.stamp, start_age=_AGE_MARKER,
                       velocities_estimated=request.estimated, revision=0, final=False)
    data = serialize_message(pred)
    marker = _DOUBLE.pack(_AGE_MARKER)
    at = data.find(marker)
    if data[:2] not in _CDR_LITTLE_ENDIAN or at < 0 or data.find(marker, at + 1) >= 0:
        return None
    return SerializedMessages(data, at, serialize_message(pred.trajectory),
                              serialize_message(io.joint_reactions_message(robot, result, stamp)))


def prediction_message(messages: SerializedMessages, age: float) -> StopPrediction:
    """The prediction as a message object with its age (for the node's record of what it last published)."""
    return deserialize_message(messages.prediction_with_age(age), StopPrediction)
