"""The recorded stops with known truth that the brake identification is fitted to (test/recordings/conftest.py)."""

from test.recordings.conftest import (  # noqa: F401 - fixtures shared with the recordings
    realistic, realistic_bag, realistic_fit, realistic_stops,
)
