"""The recorded stops with known truth that the brake identification is fitted to (test/recordings/conftest.py)."""

from test.recordings.conftest import truth_bag, truth_samples  # noqa: F401 - fixtures shared with the recordings
