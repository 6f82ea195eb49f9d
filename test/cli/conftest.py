"""The recorded stops with known truth that vtm-calibrate reads (test/recordings/conftest.py)."""

from test.recordings.conftest import realistic  # noqa: F401 - fixture shared with the recordings
