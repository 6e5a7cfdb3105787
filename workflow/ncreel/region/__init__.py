"""Regions: a box, a country or a polygon file, and the grid cut to one.

Owns: :mod:`.spec` (config ``region`` read into a :class:`~ncreel.region.spec.Region`),
:mod:`.naturalearth` (coastlines, borders and countries from the shipped Natural Earth
data), :mod:`.polygon` (polygon files, and each cell's covered fraction and distance to
the edge), :mod:`.restrict` (a series that *is* the region's cells) and
:mod:`.selection` (the series a rule's parameters select: input, selection, region).

May import: :mod:`ncreel.core`, :mod:`ncreel.config`, :mod:`ncreel.input`,
:mod:`ncreel.cells` (cell polygons), shapely, pyproj, pyshp. Never rendering, the cluster
code or a run's bookkeeping.
"""
