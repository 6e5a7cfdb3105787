"""ncreel: NetCDF time series to a movie and a per-grid-cell PostgreSQL COPY table.

All of the workflow's logic lives here; the Snakemake rules and scripts only map
``snakemake.input/params/output`` onto these functions. This package never imports
snakemake, so every function can be unit-tested directly.

Subpackages, one concern each (each ``__init__`` says what it owns and may import):

- :mod:`ncreel.cells`: cell models (the plugin contract, ``field``, ``etr_risk`` and its
  soil time course), cell geometry, and each shard's result rows;
- :mod:`ncreel.pg`: PostgreSQL COPY text, the load script, the reduce and load steps;
- :mod:`ncreel.render`: maps, frames, per-shard movie segments, ffmpeg, calibration;
- :mod:`ncreel.report`: pages of the Snakemake report;
- :mod:`ncreel.cluster`: PBS Pro, Slurm and the run lock; standard library only.

Modules at this level are shared by several of those: the input series
(:mod:`.source`; :mod:`.cfaxes` and :mod:`.timeaxis`, how its axes are detected
and its time decoded; :mod:`.inputcheck`, :mod:`.stats`, :mod:`.sample`), the shard plan
(:mod:`.shardplan`) and one shard job (:mod:`.process_shard`), job resources
(:mod:`.resources`, :mod:`.jobrecord`, :mod:`.procmem`), config checks
(:mod:`.configcheck`; :mod:`.runconfig` runs them all at parse time) and small helpers
(:mod:`.errors`, :mod:`.io`, :mod:`.logs`, :mod:`.progress`). This ``__init__`` imports
only :mod:`.errors` (standard library), so ``ncreel.cluster`` stays importable without
third-party packages.
"""

from ncreel.errors import NcreelError

__all__ = ["NcreelError"]
__version__ = "0.1.0"
