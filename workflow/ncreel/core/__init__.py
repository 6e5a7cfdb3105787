"""What every layer uses: ncreel's one-line error, file writes, process memory, user code.

Owns: :mod:`.errors` (:class:`~ncreel.core.errors.NcreelError`, the ``ncreel: error: ...``
line, and the data errors of model code), :mod:`.io` (atomic writes: nothing half-written
looks complete), :mod:`.procmem` (a process's resident memory, for the memory model) and
:mod:`.userimport` (importing a user's ``package.module:function``).

The bottom layer: imports the standard library only, so every other folder, and the
login-node tools under a bare ``python3``, may import it.
"""
