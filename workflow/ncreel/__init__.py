"""ncreel: NetCDF time series to a movie and a per-grid-cell PostgreSQL COPY table.

All of the workflow's logic lives here; the Snakemake rules and scripts only map
``snakemake.input/params/output`` onto these functions. This package never imports
snakemake, so every function can be unit-tested directly.
"""

from ncreel.errors import NcreelError

__all__ = ["NcreelError"]
__version__ = "0.1.0"
