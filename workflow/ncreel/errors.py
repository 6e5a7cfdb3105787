"""Exceptions whose message is a one-line, user-facing explanation."""


class NcreelError(Exception):
    """Bad input or configuration; ``str(err)`` names the file, variable or key at fault.

    ``str(err)`` is always one line: text quoted from a library (xarray's "no IO backend"
    hint spans several lines) is folded, so ``ncreel: error: ...`` stays one line.
    """

    def __str__(self) -> str:
        return " ".join(super().__str__().split())
