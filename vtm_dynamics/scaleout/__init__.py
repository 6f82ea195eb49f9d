"""Running many core predictions on a distributed engine (Dask distributed): an embedded local cluster on every
core of this machine by default, or an existing cluster given its scheduler address.

Modules: :mod:`.chunk_store` (one Parquet file per finished chunk, written atomically, a manifest holding the run's
inputs and their hash; resuming skips valid chunks and never mistakes a half-written file for a result),
:mod:`.map_runner` (the map's chunks as Dask tasks, progress with rate and time left, failures reported with their
input while the rest completes) and :mod:`.result_file` (the finished map read back a block of rows at a time).
This layer sits above the core (it calls :mod:`vtm_dynamics.core.stopping`) and below the command-line tools; the
core never imports it.
"""
