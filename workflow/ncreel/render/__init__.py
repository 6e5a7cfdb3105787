"""Frames and the movie: maps, one reused figure per worker, per-shard segments, ffmpeg.

Owns: :mod:`.maps` (projections; coastlines, borders and a region's outline as map
lines), :mod:`.frame` (drawing one frame into reused pixels), :mod:`.panels` (several
maps in one frame), :mod:`.panelplan` (config ``panels`` checked and read),
:mod:`.overlays` (contour lines and wind vectors), :mod:`.decorate` (a user's own
artists), :mod:`.frametext` and :mod:`.timelabels` (title, time label, colour bar),
:mod:`.segment` (one shard's frames into an H.264 segment with worker processes),
:mod:`.movie` (ffmpeg encoding and joining segments) and :mod:`.calibrate` (measuring a
render worker's memory before any shard runs).

May import: the standard library, numpy, matplotlib (Agg), cartopy, shapely, Pillow,
imageio-ffmpeg, and :mod:`ncreel.core`, :mod:`ncreel.config`, :mod:`ncreel.input`,
:mod:`ncreel.region` and :mod:`ncreel.run`. Not the cell models nor PostgreSQL code. This
``__init__`` imports nothing, so importing one module does not pull in matplotlib.
"""
