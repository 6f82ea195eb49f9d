"""Defaults of the distributed runs, in a module without imports, so that a command line can show them in its
``--help`` without loading Dask."""

CONNECT_TIMEOUT = 5.0  # [s] to reach an existing scheduler and hear it answer
