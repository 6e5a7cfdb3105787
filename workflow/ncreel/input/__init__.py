"""Reading inputs: NetCDF files and meshes as one time series, its axes, grid and time.

Owns: :mod:`.source` (a path, a glob or a list of files opened as one
:class:`~ncreel.input.source.Series`, read in blocks), :mod:`.cfaxes` (which dimension
is time, latitude, longitude, from CF attributes), :mod:`.timeaxis` (decoding time in
any CF calendar), :mod:`.gridmap` (CF grid mappings and 2-D coordinates),
:mod:`.mesh` (unstructured meshes through uxarray), :mod:`.netcdf3` and
:mod:`.inputcheck` (truncated or oversized inputs, before any job), :mod:`.identity`
(which version of each input a run was planned from) and :mod:`.units` (CF units).

May import: :mod:`ncreel.core`, :mod:`ncreel.config`, :mod:`ncreel.pg` (the PostgreSQL
type of a time axis), xarray, netCDF4, cftime, pyproj, uxarray. Never the cell models,
regions, rendering, the cluster code or a run's bookkeeping.
"""
