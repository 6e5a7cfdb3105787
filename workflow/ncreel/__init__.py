"""ncreel: NetCDF time series to a movie and a per-grid-cell PostgreSQL COPY table.

All of the workflow's logic lives here; the Snakemake rules and scripts only map
``snakemake.input/params/output`` onto these functions. This package never imports
snakemake, so every function can be unit-tested directly.

Subpackages by concern, each using only those above it in this list (its ``__init__``
says what it owns; ``tests/test_import_graph.py`` keeps the order):

- :mod:`ncreel.core`: the one-line error, atomic file writes, process memory, user code;
- :mod:`ncreel.config`: the config schema and its checks, the typed settings of jobs;
- :mod:`ncreel.pg`: PostgreSQL COPY text, the load script, the reduce and load steps;
- :mod:`ncreel.input`: reading inputs: files as one series, axes, grids, meshes, time;
- :mod:`ncreel.cells`: cell models, cell polygons, each shard's result rows;
- :mod:`ncreel.region`: a box, a country or a polygon file, and the grid cut to one;
- :mod:`ncreel.run`: a run's bookkeeping: shard plan, job resources and records, logs;
- :mod:`ncreel.cluster`: PBS Pro, Slurm, the run lock and status; standard library only;
- :mod:`ncreel.render`: maps, frames, panels, overlays, per-shard segments, ffmpeg;
- :mod:`ncreel.report`: pages of the Snakemake report;
- :mod:`ncreel.jobs`: what the Snakefile and each job call: the run's configuration, the
  shard job, the statistics pass, ``ncreel inspect``.

At this level are the entry points only: :mod:`.cli` (the ``ncreel`` command),
:mod:`.sample` (``python -m ncreel.sample``: the bundled demo input) and ``__main__``.
This ``__init__`` imports only :mod:`ncreel.core.errors` (standard library), so
``ncreel.cluster`` stays importable without third-party packages.
"""

from ncreel.core.errors import NcreelError

__all__ = ["NcreelError"]
__version__ = "0.1.0"
