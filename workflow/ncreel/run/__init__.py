"""A run's bookkeeping and progress: shard plan, job resources, job records, logs.

Owns: :mod:`.shardplan` (the time axis split into shards), :mod:`.resources` (each
rule's ``mem_mb`` and ``runtime``, growing with ``attempt``), :mod:`.jobrecord` (what
each job declared and used), :mod:`.jobtext` (job names, input links), :mod:`.lastrun`
(the settings each run was started with), :mod:`.software` (what it ran with),
:mod:`.logs` (logging set-up of a job),
:mod:`.progress` (progress lines), :mod:`.incomplete` (outputs a killed job left).

May import: :mod:`ncreel.core`, :mod:`ncreel.config`, :mod:`ncreel.input` (the size of a
series). :mod:`.shardplan`, :mod:`.jobrecord` and :mod:`.incomplete` use the standard
library only: :mod:`ncreel.cluster` runs them under a bare ``python3``.
"""
