"""The E-stop line with several publishers, and the rule of who may release it. Plain Python (no rclpy).

The node keeps the latest value of every publisher of ``estop`` it has heard, in a table of at most
``max_publishers`` entries (a stranger creating publishers must not grow memory without bound). The line is
*stopping* while some publisher's latest value is true - a *holder*. A ``true`` from a publisher whose previous
value was false, or that is not in the table, is a rising edge (a trigger); a repeated ``true`` is not.

Who releases the line: only its holders, each by its own ``false``. A holder is never evicted from the table: when room is needed, the least recently heard *non-holder* goes; when every
entry is a holder, a further ``false`` is not recorded (a publisher that never held the line has nothing to
release) and a further ``true`` is counted as an unrecorded holder - the line is stopping anyway, and the trigger
it carries is still an edge. (Such a publisher is not remembered: once the recorded holders release the line, its
next cyclic ``true`` is a new edge - a further prediction, never a lost one.) So no number of other publishers sending ``false`` can end a stop that a PLC holds
(before, 64 publishers each sending ``false`` once evicted the PLC's entry and released the line, and the PLC's
next cyclic ``true`` started a spurious second stop).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Hashable


class EstopLine:
    """Latest ``estop`` value per publisher; see the module docstring for the semantics."""

    def __init__(self, max_publishers: int = 64) -> None:
        self.max_publishers = max(1, int(max_publishers))
        self._latest: OrderedDict[Hashable, bool] = OrderedDict()  # least recently heard first
        self._holders = 0  # recorded publishers whose latest value is true
        self.unrecorded = 0  # ``true`` messages of publishers that found the table full of holders

    def update(self, publisher: Hashable, value: bool) -> bool:
        """Record ``value`` from ``publisher``; return whether it is a rising edge."""
        value = bool(value)
        previous = self._latest.pop(publisher, None)
        if previous:
            self._holders -= 1
        if previous is None and len(self._latest) >= self.max_publishers and not self._evict_non_holder():
            if value:
                self.unrecorded += 1
                return True  # a new publisher's true is an edge; the line is held by the others anyway
            return False  # a false from a publisher that never held the line releases nothing
        self._latest[publisher] = value
        if value:
            self._holders += 1
        return value and not previous

    def _evict_non_holder(self) -> bool:
        for publisher, held in self._latest.items():  # least recently heard first
            if not held:
                del self._latest[publisher]
                return True
        return False

    @property
    def stopping(self) -> bool:
        return self._holders > 0

    @property
    def publishers(self) -> int:
        return len(self._latest)

    @property
    def holders(self) -> int:
        return self._holders
