"""Import a user's ``package.module:name`` (a cell model, a decorate function)."""

from __future__ import annotations

import importlib
import os
import sys

from ncreel.core.errors import NcreelError


def import_user_object(spec: str, key: str):
    """Return the object named by `spec`, ``package.module:name`` (``name`` may be dotted).

    The module is imported normally; if that fails, once more with the current working
    directory (Snakemake's working directory) on ``sys.path``, so a file beside the run
    file is found without installing it.

    Parameters
    ----------
    spec : str
        ``package.module:name``.
    key : str
        The config key naming it, for messages (``cells.model``, ``decorate``).

    Returns
    -------
    object or None
        None when the module has no such name.

    Raises
    ------
    NcreelError
        ``config key '<key>': cannot import '<module>' (<reason>)``; the module raising
        anything else while imported is said the same way with the error's type.
    """
    module_name, _, attr = str(spec).partition(":")
    try:
        module = _import(module_name, key)
    except NcreelError:
        raise
    except Exception as err:  # the module itself raised while imported
        raise NcreelError(f"config key '{key}': importing '{module_name}' raised "
                          f"{type(err).__name__}: {err}") from None
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
    return obj


def _import(module_name: str, key: str):
    try:
        return importlib.import_module(module_name)
    except ImportError as first:
        cwd = os.getcwd()
        if cwd in sys.path:
            raise NcreelError(f"config key '{key}': cannot import '{module_name}' ({first})"
                              ) from first
        sys.path.append(cwd)
        try:
            return importlib.import_module(module_name)
        except ImportError as err:
            raise NcreelError(f"config key '{key}': cannot import '{module_name}' ({err})"
                              ) from err
