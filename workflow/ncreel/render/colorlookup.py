"""Colours of values exactly as ``pcolormesh`` paints them, without matplotlib's float copies.

Used by the frames (:mod:`ncreel.render.frame`) and the mesh image
(:mod:`ncreel.render.meshdraw`); its own module so that neither imports the other.
"""

from __future__ import annotations

import numpy as np
from matplotlib.colors import Colormap, Normalize

#: Values coloured per block by :class:`ColorLookup` (a block's work arrays fit in L2 cache).
_BLOCK = 2**15


class ColorLookup:
    """Colours of values exactly as ``pcolormesh`` paints them: `norm`, then `cmap`'s LUT.

    The steps are those of :class:`matplotlib.colors.Normalize` (same ufuncs, same dtype)
    and :meth:`matplotlib.colors.Colormap.__call__` (``N`` bins, the top edge in the last
    bin, under / over / bad colours, non-finite values bad), and the 8-bit colours are
    rounded as Agg rounds them (``uround(c * 255)``).

    Parameters
    ----------
    cmap : matplotlib.colors.Colormap
    norm : matplotlib.colors.Normalize
        A plain ``Normalize`` with finite ``vmin < vmax`` is applied with the same ufuncs,
        in blocks; any other norm (or ``clip=True``) is called as it is.
    """

    def __init__(self, cmap: Colormap, norm: Normalize) -> None:
        self.cmap, self.norm = cmap, norm
        n = self.n = cmap.N
        # Rows in slot order (see _slots): the N colours, over, bad, under (slot -1).
        lut = np.vstack([cmap(np.arange(n)), cmap.get_over(), cmap.get_bad(),
                         cmap.get_under()])
        lut8 = np.floor(lut * 255 + 0.5).astype(np.uint8)
        self.lut32 = np.ascontiguousarray(lut8).view(np.uint32)[:, 0]
        #: Colormap row (``index``'s numbering) of each slot.
        self._row = np.array([*range(n), n + 1, n + 2, n], dtype=np.intp)
        if not ((lut8[:, 3] == 255) | (lut8[:, 3] == 0)).all():
            raise ValueError(f"colormap '{cmap.name}': partly transparent colours are not "
                             "supported")
        self._linear = type(norm) is Normalize and not norm.clip
        self._buffers = None

    def index(self, values: np.ndarray) -> np.ndarray:
        """LUT row of each value: ``0..N-1`` colours, ``N`` under, ``N+1`` over, ``N+2`` bad.

        Parameters
        ----------
        values : numpy.ndarray, shape (n,)
            Values in the variable's units.

        Returns
        -------
        numpy.ndarray, shape (n,), intp
        """
        return self._map(values, self._row, None)

    def rgba32(self, values: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """RGBA of `values` as one uint32 each (memory order R, G, B, A).

        Parameters
        ----------
        values : numpy.ndarray, shape (n,)
            Values in the variable's units.
        out : numpy.ndarray, shape (n,), uint32, optional
            Written in place and returned.

        Returns
        -------
        numpy.ndarray, shape (n,), uint32
            A colour is opaque where its alpha byte (bits 24-31) is 255, else transparent.
        """
        return self._map(values, self.lut32, out)

    def _map(self, values: np.ndarray, table: np.ndarray, out: np.ndarray | None):
        # table[slot] of each value, a block at a time: the dozen passes over a block then
        # run in the CPU cache instead of memory (about twice as fast on a 0.25 degree grid).
        values = np.asarray(values)
        if values.ndim != 1:
            raise ValueError(f"values: need a 1-D array, got shape {values.shape}")
        if out is None:
            out = np.empty(values.shape, table.dtype)
        # Integers are normalised in a float type, as Normalize.process_value does.
        dtype = (values.dtype if values.dtype.kind == "f"
                 else np.promote_types(values.dtype, np.float32))
        if self._buffers is None or self._buffers[0].dtype != dtype:
            self._buffers = (np.empty(_BLOCK, dtype), np.empty(_BLOCK, bool),
                             np.empty(_BLOCK, bool), np.empty(_BLOCK, np.intp))
        if not self._linear and values.size:
            self.norm.autoscale_None(np.ma.masked_invalid(values))  # on all values, once
        # A huge finite value may overflow to inf on the way: it is then over / under.
        with np.errstate(over="ignore"):
            for a in range(0, values.size, _BLOCK):
                b = min(a + _BLOCK, values.size)
                r, bad, edge, slot = (buf[:b - a] for buf in self._buffers)
                inside = self._slots(values[a:b], r, bad, edge, slot)
                # Slot -1 (under) is the last row: "wrap"; "clip" is faster, for slots
                # known to lie in 0..N-1.
                table.take(slot, out=out[a:b], mode="clip" if inside else "wrap")
        return out

    def _slots(self, values, r, bad, edge, slot) -> bool:
        # Slot of each value: 0..N-1 colours, N over, N+1 bad, -1 under. Clipping to
        # [-1, N] and flooring do Colormap.__call__'s under / over tests in one pass each
        # (floor, not the cast's truncation, takes [-1, 0) to under); all steps are exact,
        # in the data's float type as Colormap's. copyto(where=) is several times faster
        # than putmask.
        n = self.n
        if self._linear:
            vmin, vmax = np.float64(self.norm.vmin), np.float64(self.norm.vmax)
            # Normalize subtracts in float64, then divides in place in the data's dtype.
            if values.dtype == np.float64 and values.dtype.isnative:
                np.subtract(values, vmin, out=r)  # the same, without the casting loop
            else:
                np.subtract(values, vmin, out=r, dtype=np.float64, casting="same_kind")
            np.divide(r, vmax - vmin, out=r, casting="same_kind")
            r *= n
            # Most blocks lie within the limits: every r in [0, n) (min and max are NaN
            # when a value is, +-inf when one is) is a colour row, the cast's truncation
            # its floor; about half the passes of the general case below.
            lo, hi = r.min(initial=np.inf), r.max(initial=-np.inf)
            if 0 <= lo and hi < n:
                np.copyto(slot, r, casting="unsafe")
                return True
            # Bad is what masked_invalid masks; a finite value whose r overflows to
            # +-inf is over / under, as in Colormap.
            np.isfinite(values, out=bad)
            np.logical_not(bad, out=bad)
        else:
            # In the norm's own result type, which Colormap then bins; bad is the norm's
            # mask when anything is masked, else NaN (Colormap's rule).
            res = self.norm(np.ma.masked_invalid(values))
            r = np.ma.getdata(res).copy()
            np.copyto(bad, np.ma.getmaskarray(res) if np.ma.is_masked(res) else np.isnan(r))
        if r.dtype.kind == "f" and not self._linear:  # integers (BoundaryNorm): rows already
            r *= n
        if r.dtype.kind == "f":  # the top edge belongs to the last colour
            np.copyto(r, n - 1, where=np.equal(r, n, out=edge))
        np.clip(r, -1, n, out=r)
        np.floor(r, out=r)
        np.copyto(r, n + 1, where=bad)
        np.copyto(slot, r, casting="unsafe")
        return False
