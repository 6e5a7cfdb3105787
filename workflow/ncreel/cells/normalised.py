"""A shard's rows in the normalised layout: values rows, and its cells and steps once each.

The model's wide rows are split by column (:func:`ncreel.pg.layout.split_columns`): the
values columns are written per row as the blocks come; a cell's columns (``lat``,
``lon``, ``lon_raw``, its polygon and area) are kept from the cell's first row in the
shard and written once at the end, sorted by ``cell_id``; a step's columns from the
step's first row. The reduce rule joins the shards' files (cells seen by several shards
once, :func:`ncreel.pg.reduce.merge_cells`).
"""

from __future__ import annotations

import numpy as np

from ncreel.pg.types import AREA_COLUMN, GEOMETRY_COLUMN

#: Ellipsoid of EPSG:4326 (WGS 84), on which cell areas are computed.
ELLIPSOID = "WGS84"


def cell_area(ewkt) -> np.ndarray:
    """Geodesic area of each (multi)polygon on the WGS 84 ellipsoid, in m².

    Each part's exterior ring is measured with ``pyproj.Geod.polygon_area_perimeter``
    (Karney, "Algorithms for geodesics", J. Geodesy 87, 2013), whatever its orientation,
    and the parts of a cell split at the antimeridian are summed.

    Parameters
    ----------
    ewkt : sequence of str or None, length n
        ``SRID=4326;MULTIPOLYGON(...)`` as :meth:`ncreel.cells.geometry.CellGeometry.polygons`
        writes it; None for a cell without polygon.

    Returns
    -------
    numpy.ndarray, shape (n,), float64
        Area in m²; NaN where there is no polygon.
    """
    import shapely
    from pyproj import Geod

    text = np.array([None if t is None else t.split(";", 1)[-1] for t in ewkt], dtype=object)
    area = np.full(len(text), np.nan)
    have = np.flatnonzero(text != None)  # noqa: E711 - elementwise test for None
    if not have.size:
        return area
    parts, index = shapely.get_parts(shapely.from_wkt(text[have]), return_index=True)
    geod = Geod(ellps=ELLIPSOID)
    part_area = np.empty(len(parts))
    for i, ring in enumerate(shapely.get_exterior_ring(parts)):
        x, y = shapely.get_coordinates(ring).T
        part_area[i] = abs(geod.polygon_area_perimeter(x, y)[0])
    area[have] = np.bincount(index, weights=part_area, minlength=have.size)
    return area


def _take(values, index: np.ndarray):
    import polars as pl

    if isinstance(values, pl.Series):
        return values.gather(index)
    return np.asarray(values)[index]


class NormalisedRows:
    """Writes one shard's rows of a :class:`ncreel.cells.rows.ShardRows` in three files.

    Parameters
    ----------
    rows : ncreel.cells.rows.ShardRows
        The configured model, context and geometry.
    """

    def __init__(self, rows) -> None:
        from ncreel.pg.layout import split_columns

        self.rows = rows
        self.split = split_columns(rows.columns)
        self._seen = np.zeros(0, dtype=bool)
        self._cells: list[dict] = []

    def write(self, fh, steps_fh, t0: int, block: np.ndarray) -> int:
        """Write one block's values rows to `fh` and its steps to `steps_fh`; keep its cells.

        Returns
        -------
        int
            Values rows written.
        """
        from ncreel.pg.copytext import write_copy_rows

        out = self.rows.rows(t0, block)
        n = write_copy_rows(fh, {c: out[c] for c, _ in self.split["values"]})
        if not n:
            return 0
        time_index = np.asarray(out["time_index"])
        _, first = np.unique(time_index, return_index=True)
        # Blocks hold disjoint, increasing steps: each block's steps are new.
        write_copy_rows(steps_fh, {c: _take(out[c], first) for c, _ in self.split["steps"]})
        cell = np.asarray(out["cell_id"], dtype=np.int64)
        ids, first = np.unique(cell, return_index=True)
        if ids[-1] >= self._seen.size:
            self._seen = np.concatenate([self._seen, np.zeros(ids[-1] + 1 - self._seen.size,
                                                              dtype=bool)])
        new = ~self._seen[ids]
        if new.any():
            self._seen[ids[new]] = True
            keep = first[new]
            self._cells.append({c: _take(out[c], keep) for c, _ in self.split["cells"]
                                if c in out})
        return n

    def finish(self, cells_fh) -> int:
        """Write the shard's cells (sorted by ``cell_id``, polygon and area added).

        Returns
        -------
        int
            Cells written.
        """
        import polars as pl

        from ncreel.pg.copytext import write_copy_rows

        if not self._cells:
            return 0
        cols = {}
        for c, _ in self.split["cells"]:
            if c in self._cells[0]:
                parts = self._cells
                cols[c] = (pl.concat([p[c] for p in parts]) if isinstance(parts[0][c], pl.Series)
                           else np.concatenate([p[c] for p in parts]))
        order = np.argsort(np.asarray(cols["cell_id"]), kind="stable")
        cols = {c: _take(v, order) for c, v in cols.items()}
        if self.rows.geometry is not None:
            ids = np.asarray(cols["cell_id"], dtype=np.int64)
            polygons = self.rows.geometry.polygons(ids)
            cols[GEOMETRY_COLUMN] = polygons
            cols[AREA_COLUMN] = cell_area(polygons.to_list())
        cols = {c: cols[c] for c, _ in self.split["cells"]}
        return write_copy_rows(cells_fh, cols)
