"""Whether two CF ``units`` attributes name the same unit.

CF ``units`` are UDUNITS strings, and one unit has many spellings (``K``, ``kelvin``,
``degK``; ``m s-1``, ``m/s``). They are parsed with cf-xarray's pint registry, which
reads UDUNITS syntax; a string it cannot parse is compared as text, and the caller says so.
"""

from __future__ import annotations

import functools
import re


def same_units(a: str, b: str) -> bool | None:
    """Whether the CF units strings `a` and `b` name the same unit.

    Parameters
    ----------
    a, b : str
        CF ``units`` attributes (UDUNITS syntax).

    Returns
    -------
    bool or None
        True for the same unit (equal strings, or e.g. ``K`` and ``kelvin``, ``m s-1``
        and ``m/s``); False for different units, even convertible ones (``K`` and
        ``degC``, ``hPa`` and ``Pa``); None when either is not a unit the registry
        knows and the strings differ (the caller compares them as text and says so).
    """
    if a.strip() == b.strip():
        return True
    ua, ub = _parse(a.strip()), _parse(b.strip())
    if ua is None or ub is None:
        return None
    return ua == ub


#: ``mb`` as a unit of its own: millibar in the files that write it (pressure levels of
#: older reanalyses and model output), which pint would read as millibarn (an area).
_MILLIBAR = re.compile(r"(?<![A-Za-z_])mb(?![A-Za-z_])")


def cf_units_text(text: str) -> str:
    """`text` with ``mb`` spelled ``mbar``: the pressure unit, not pint's millibarn.

    Parameters
    ----------
    text : str
        A CF ``units`` attribute or a quantity (``850 mb``).

    Returns
    -------
    str
        The same text for the registry (:mod:`cf_xarray.units`) to read.
    """
    return _MILLIBAR.sub("mbar", text)


@functools.lru_cache(maxsize=64)
def _parse(text: str):
    import pint  # noqa: F401 (cf_xarray.units is a pint registry; named for the envs)
    from cf_xarray.units import units

    try:
        return units.Unit(cf_units_text(text))
    except Exception:  # pint raises several kinds for strings it cannot read
        return None
