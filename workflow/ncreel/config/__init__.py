"""A run's settings: the config schema and its checks, and the typed settings jobs receive.

Owns: :mod:`.configcheck` (what JSON schema cannot say: names, colours, renamed keys,
the closest key to a mistyped one), :mod:`.settings` (the frozen dataclasses each rule's
adapter builds from its ``params``, and ``calibration.json``) and :mod:`.docgen`
(``python -m ncreel.config.docgen``: the configuration reference page from the schema).
What the rules need from a whole run's config is :mod:`ncreel.jobs.runconfig`, which
reads the input as well.

May import: :mod:`ncreel.core` and the standard library (PyYAML where the schema is
read). :mod:`.settings` stays a leaf so that login-node tools can read a calibration.
"""
