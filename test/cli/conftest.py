"""The recorded stops with known truth that vtm-calibrate and vtm-predict --bag read (test/recordings/conftest.py)."""

from test.recordings.conftest import truth_bag, truth_samples  # noqa: F401 - fixtures shared with the recordings
