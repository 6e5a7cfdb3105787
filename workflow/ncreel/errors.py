"""Exceptions whose message is a one-line, user-facing explanation."""


class NcreelError(Exception):
    """Bad input or configuration; ``str(err)`` names the file, variable or key at fault."""
