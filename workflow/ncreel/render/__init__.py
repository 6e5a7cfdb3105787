"""Frames and the movie: maps, one reused figure per worker, per-shard segments, ffmpeg.

Owns: :mod:`.maps` (projections, coastlines and borders from the shipped Natural Earth
data), :mod:`.frame` (drawing one frame into reused pixels), :mod:`.segment` (one shard's
frames into an H.264 segment with worker processes), :mod:`.movie` (ffmpeg encoding and
joining segments) and :mod:`.calibrate` (measuring a render worker's memory before any
shard runs).

May import: the standard library, numpy, matplotlib (Agg), cartopy, shapely, Pillow,
imageio-ffmpeg, and :mod:`ncreel.source`, :mod:`ncreel.shardplan`, :mod:`ncreel.io`,
:mod:`ncreel.procmem`, :mod:`ncreel.progress`, :mod:`ncreel.errors`. Not the cell models
nor PostgreSQL code. This ``__init__`` imports nothing, so importing one module does not
pull in matplotlib.
"""
