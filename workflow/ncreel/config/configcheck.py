"""Parse-time checks of config values that the JSON schema cannot express safely.

Three concerns, each checked before Snakemake sees the value in a job:

* a database password never enters Snakemake's config (which Snakemake pickles into every
  job's ``.snakemake/scripts/tmp*.py`` and which ``--config`` puts into ``ps`` output):
  :func:`check_database` refuses it and says where libpq reads passwords from;
* schema-validation messages never echo a value that may hold a password
  (:func:`schema_error_message`);
* names that become paths, SQL identifiers or SQL literals are checked as whole strings
  with the limits of the later steps (:func:`check_names`): Python's and JSON schema's
  ``$`` also match before a final newline, so ``run: "x\\n"`` would pass a ``^…$`` pattern.

It also reads the schema's defaults (:func:`schema_defaults`), the only place they live,
and moves renamed keys to their new names (:func:`upgrade_renamed_keys`).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ncreel.core.errors import NcreelError

#: Where libpq looks for a password (https://www.postgresql.org/docs/current/libpq-pgpass.html,
#: libpq-pgservice.html, libpq-envars.html), in the words of the error message.
PASSWORD_HELP = ("put the password in ~/.pgpass (or the file PGPASSFILE names), in a "
                 "connection service file (database.service), or in PGPASSWORD in the "
                 "environment, and remove it from the config")

#: PostgreSQL's NAMEDATALEN - 1: the longest identifier, in bytes.
MAX_IDENTIFIER_BYTES = 63
#: Prefix of the table name derived from ``run`` when ``table`` is null.
TABLE_PREFIX = "ncreel_"

_RUN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# A part of a table name: any text but control characters (a newline would split the
# psql \\copy line), quoted wherever it is written.
_TABLE_PART = re.compile(r"[^\x00-\x1f\x7f]+")
# user:password@ in a URI, when the URI cannot be parsed (the password must still be refused).
_URI_PASSWORD = re.compile(r"^[a-z]+://[^/@?#]*:[^/@?#]*@", re.IGNORECASE)


def url_has_password(url: str) -> bool:
    """Tell whether a libpq URI or ``key=value`` string carries a password.

    Parsed with psycopg's :func:`~psycopg.conninfo.conninfo_to_dict` (libpq's own parser),
    so ``postgresql://u:pw@h/db``, ``...?password=pw`` and ``password=pw host=h`` are all
    found; an unparseable string is checked for ``user:password@``.
    """
    from psycopg.conninfo import conninfo_to_dict

    try:
        return "password" in conninfo_to_dict(url)
    except Exception:  # psycopg.ProgrammingError; the string is never echoed
        return bool(_URI_PASSWORD.match(url.strip())) or bool(
            re.search(r"(^|\s)password\s*=", url))


def check_database(database) -> None:
    """Refuse a ``database`` config value that holds a password or is not a mapping.

    Parameters
    ----------
    database : object
        The config's ``database`` value (``{url: ..., service: ...}``).

    Raises
    ------
    NcreelError
        A password in ``url``, or ``database`` given as a plain string (as
        ``--config database=postgresql://...`` does); the message never quotes the value.
    """
    if database is None:
        return
    if not isinstance(database, Mapping):
        raise NcreelError("config key 'database' must be a mapping, e.g. "
                          "--config 'database={url: postgresql://user@host/db}' (value not "
                          "shown: it may hold a password)")
    url = database.get("url")
    if isinstance(url, str) and url_has_password(url):
        raise NcreelError(f"config key 'database.url' contains a password: {PASSWORD_HELP} "
                          "(the password was not used, shown or stored)")


def known_keys() -> list[str]:
    """Every setting of the config schema as a dotted key (``map.projection``)."""
    def walk(node, prefix):
        for name, sub in node.get("properties", {}).items():
            yield f"{prefix}{name}"
            yield from walk(sub, f"{prefix}{name}.")
            if isinstance(sub.get("items"), dict):  # a list's items: panels[].input
                yield from walk(sub["items"], f"{prefix}{name}[].")

    return list(walk(load_schema(), ""))


#: Words people use for a setting that has another name.
SYNONYMS = {"colour": "cmap", "color": "cmap", "colormap": "cmap", "colourmap": "cmap",
            "var": "variable", "file": "input", "files": "input", "name": "run",
            "threads": "render_processes", "processes": "render_processes",
            "framerate": "fps", "frame_rate": "fps", "quality": "crf", "output": "run"}


def close_keys(key: str, parent: str = "") -> list[str]:
    """Return the settings whose name is close to `key` (a typo, a wrong parent).

    Parameters
    ----------
    key : str
        The unknown name, plain (``coastline``) or dotted (``map.coastline``).
    parent : str
        Dotted key of the object `key` was given in (``""`` at the top level).

    Returns
    -------
    list of str
        At most three dotted keys, closest first (``difflib`` ratio >= 0.6), compared by
        full path and by last part, so ``coastline`` finds ``map.coastlines``.
    """
    import difflib

    # An item of a list is named by its index (panels.0.input): compare as panels[].input.
    full = setting_key(f"{parent}.{key}" if parent else key)
    keys = known_keys()
    if full.lower() in SYNONYMS:
        return [SYNONYMS[full.lower()]]
    by_full = difflib.get_close_matches(full, keys, n=3, cutoff=0.6)
    leaves: dict[str, list[str]] = {}
    for k in keys:
        leaves.setdefault(k.rpartition(".")[2], []).append(k)
    by_leaf = [k for name in difflib.get_close_matches(key.rpartition(".")[2], list(leaves),
                                                       n=3, cutoff=0.75)
               for k in leaves[name]]
    out = []
    for k in [*by_full, *by_leaf]:
        if k not in out and k != full:
            out.append(k)

    def ratio(k):
        return max(difflib.SequenceMatcher(None, full, k).ratio(),
                   difflib.SequenceMatcher(None, key.rpartition(".")[2],
                                           k.rpartition(".")[2]).ratio())

    # Only the clearly closest: 'varable' is 'variable', not also 'table'.
    best = max(map(ratio, out), default=0.0)
    return [k for k in out if ratio(k) >= best - 0.1][:3]


def unknown_key_message(key: str, parent: str = "") -> str:
    """One line for a config key the schema does not know, with "did you mean"."""
    full = f"{parent}.{key}" if parent else key
    close = close_keys(str(key), parent)
    hint = (f"did you mean {' or '.join(repr(c) for c in close)}?" if close
            else "`ncreel settings` lists every setting")
    if ":" in str(key):
        # `--config 'map={projection:Robinson}'` is one YAML key "projection:Robinson".
        hint = "YAML needs a space after ':', e.g. 'map={projection: Robinson}'"
    return f"config key '{full}' is not a setting of ncreel: {hint}"


def setting_key(path: str) -> str:
    """Return the setting a dotted config path names, list indices as ``[]``: panels[].input."""
    return re.sub(r"\.\d+(?=\.|$)", "[]", str(path))


def _schema_node(path: list) -> dict:
    node = load_schema()
    for part in path:
        props = node.get("properties", {})
        if isinstance(part, int) and isinstance(node.get("items"), dict):
            node = node["items"]
        elif part in props:
            node = props[part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return {}
    return node


_TYPE_WORDS = {"string": "text", "integer": "a whole number", "number": "a number",
               "boolean": "true or false", "object": "a mapping such as {key: value}",
               "array": "a list", "null": "null"}


def schema_error_message(err) -> str:
    """One plain sentence for a :class:`jsonschema.ValidationError`, naming the key.

    The sentence says what the key accepts (from the schema: its type, allowed values,
    limits, or the first sentence of its description for a pattern), never the JSON
    schema's own wording. The failing value is quoted only outside ``database`` (whose
    values may hold a password), and long values are shortened.
    """
    parts = list(err.absolute_path)
    path = ".".join(str(p) for p in parts) or "(top level)"
    secret = bool(parts) and parts[0] == "database"
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = set(err.schema.get("properties", {}))
        extra = [k for k in err.instance if k not in allowed]
        if extra and not secret:
            return unknown_key_message(str(extra[0]), ".".join(map(str, parts)))
    if secret:
        return (f"config key '{path}': not an accepted value (value not shown: it may hold a "
                f"password); `ncreel settings {path}` says what it accepts")
    value = repr(err.instance)
    value = value if len(value) <= 60 else value[:57] + "..."
    node = err.schema if isinstance(err.schema, dict) else _schema_node(parts)
    v = err.validator
    if v == "type":
        types = node.get("type")
        types = [types] if isinstance(types, str) else list(types or [])
        want = " or ".join(_TYPE_WORDS.get(t, t) for t in types)
        return f"config key '{path}' must be {want}, not {value}"
    if v == "enum":
        choices = ", ".join("null" if c is None else str(c) for c in node.get("enum", []))
        import difflib

        close = difflib.get_close_matches(str(err.instance),
                                          [str(c) for c in node.get("enum", [])], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"config key '{path}' = {value} is not one of: {choices}{hint}"
    if v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        word = {"minimum": "at least", "exclusiveMinimum": "above",
                "maximum": "at most", "exclusiveMaximum": "below"}[v]
        return f"config key '{path}' = {value} must be {word} {err.validator_value}"
    if v == "minLength":
        return f"config key '{path}' must not be empty"
    if v in ("minItems", "maxItems") and isinstance(err.instance, list):
        lo, hi = node.get("minItems"), node.get("maxItems")
        want = (f"exactly {lo}" if lo == hi else f"at most {hi}" if v == "maxItems"
                else f"at least {lo}")
        return (f"config key '{path}' has {len(err.instance)} "
                f"{'entry' if len(err.instance) == 1 else 'entries'}: it takes {want} "
                f"(`ncreel settings {setting_key(path)}` says more)")
    if v == "required":
        # jsonschema reports each missing property apart: "'input' is a required property".
        missing = re.match(r"'([^']+)' is a required", err.message)
        key = ".".join([*map(str, parts), *([missing.group(1)] if missing else [])]) or path
        return (f"config key '{key}' is required: set it in the run file (`ncreel config` "
                f"writes one) or with --config {key}=...")
    if v == "pattern":
        # x-accepts: the pattern in words (a schema annotation; validators ignore it).
        about = _schema_node(parts).get("x-accepts")
        return (f"config key '{path}' = {value} is not accepted: "
                + (f"use {about}" if about else
                   f"`ncreel settings {setting_key(path)}` says what is"))
    return (f"config key '{path}' = {value} is not an accepted value; "
            f"`ncreel settings {setting_key(path)}` says what it accepts")


def table_for_run(run: str, table: str | None) -> str:
    """Return the table name: `table`, or ``ncreel_<run>`` (non ``[a-z0-9_]`` to ``_``)."""
    return table or TABLE_PREFIX + re.sub(r"[^a-z0-9_]", "_", run.lower())


def check_names(config: Mapping) -> str:
    """Check, as whole strings, the config names that become paths, identifiers or literals.

    ``run`` names the directories ``results/<run>/`` and ``logs/<run>/`` and is written as
    an SQL literal; ``table`` (or the ``ncreel_<run>`` derived from ``run``) is a quoted
    PostgreSQL identifier of at most :data:`MAX_IDENTIFIER_BYTES` bytes per part.

    Returns
    -------
    str
        The table name.

    Raises
    ------
    NcreelError
        A name with a character outside its set (a trailing newline included) or longer
        than the identifier limit.
    """
    run = config["run"]
    if not isinstance(run, str) or not _RUN.fullmatch(run):
        raise NcreelError(f"config key 'run' = {run!r}: use letters, digits, _, . and -, "
                          "starting with a letter or digit (it names results/<run>/)")
    table = config.get("table")
    if table is not None:
        parts = table.split(".") if isinstance(table, str) else [None]
        if len(parts) > 2 or not all(p is not None and _TABLE_PART.fullmatch(p) for p in parts):
            raise NcreelError(f"config key 'table' = {table!r}: use table or schema.table, "
                              "each part non-empty without control characters (names are "
                              "quoted in SQL, so reserved words and upper case are kept)")
    name = table_for_run(run, table)
    for part in name.split("."):
        if len(part.encode()) > MAX_IDENTIFIER_BYTES:
            where = ("config key 'table'" if table else
                     f"config key 'run' (the table name {TABLE_PREFIX}<run> it derives)")
            # A table given is shortened; a name derived from run: run, or give a table.
            fix = ("shorten it" if table else f"shorten run to at most "
                   f"{MAX_IDENTIFIER_BYTES - len(TABLE_PREFIX)} characters, or set 'table'")
            raise NcreelError(f"{where}: '{part}' is {len(part.encode())} bytes, PostgreSQL "
                              f"names are at most {MAX_IDENTIFIER_BYTES}: {fix}")
    return name


#: The config schema, relative to the ``workflow/`` folder that holds the ncreel package.
SCHEMA_RELPATH = Path("schemas") / "config.schema.yaml"


def schema_path() -> Path:
    """Return the path of the config schema, ``config.schema.yaml``.

    In the repository (and a clone a workflow runs from) it is
    ``workflow/schemas/config.schema.yaml``, found by walking up from this module; an
    installed ncreel (a wheel) carries the same file as package data of
    ``ncreel._schemas`` (pyproject.toml maps ``workflow/schemas`` there).

    Raises
    ------
    FileNotFoundError
        When neither holds the schema (a package copied without its data).
    """
    for parent in Path(__file__).resolve().parents:
        if (parent / SCHEMA_RELPATH).is_file():
            return parent / SCHEMA_RELPATH
    try:
        from importlib.resources import files

        packaged = Path(str(files("ncreel._schemas") / SCHEMA_RELPATH.name))
    except (ImportError, TypeError):
        packaged = None
    if packaged is not None and packaged.is_file():
        return packaged
    raise FileNotFoundError(f"{SCHEMA_RELPATH} not found above {Path(__file__).parent} "
                            "nor in the installed package ncreel._schemas")


@functools.cache
def load_schema() -> dict:
    """Return the config schema as a dict (read once per process)."""
    import yaml  # parse time and jobs only; the login-node PBS CLI never reads the schema

    return yaml.safe_load(schema_path().read_text())


def schema_defaults(*pointer: str) -> dict:
    """Return the ``default`` of every property of one object in the config schema.

    Parameters
    ----------
    *pointer : str
        Keys from the schema's root to an object schema, e.g. ``("$defs", "etr_params")``.

    Returns
    -------
    dict
        Property name -> its default (a fresh copy; properties without one are left out).
    """
    node = load_schema()
    for key in pointer:
        node = node[key]
    return {name: copy.deepcopy(sub["default"])
            for name, sub in node["properties"].items() if "default" in sub}


#: Top-level config keys that were renamed: old name -> new name. The old one still works.
RENAMED_KEYS = {
    # Worker processes, not threads (spawned, each with its own figure and encoder).
    "render_threads": "render_processes",
}


def upgrade_renamed_keys(config: dict) -> list[str]:
    """Move renamed top-level keys of `config` (in place) to their new names.

    Parameters
    ----------
    config : dict
        The config as given, before schema validation.

    Returns
    -------
    list of str
        One deprecation note per old key found, to be shown once.

    Raises
    ------
    NcreelError
        When a key is given under both its old and its new name.
    """
    notes = []
    for old, new in RENAMED_KEYS.items():
        if old not in config:
            continue
        if new in config:
            raise NcreelError(f"config keys '{old}' and '{new}' are both set: '{old}' is the "
                              f"old name of '{new}'; give only {new}")
        config[new] = config.pop(old)
        notes.append(f"config key '{old}' is deprecated: call it '{new}'")
    notes += _upgrade_region_table(config)
    return notes


def _upgrade_region_table(config: dict) -> list[str]:
    # region.table (region or global) was the table's extent before cells.region.
    region, cells = config.get("region"), config.get("cells")
    if not isinstance(region, Mapping) or region.get("table") not in ("region", "global"):
        return []  # absent, or a value the schema refuses naming region.table
    if isinstance(cells, Mapping) and cells.get("region") is not None:
        raise NcreelError("config keys 'region.table' and 'cells.region' are both set: "
                          "region.table is the old way to give the table's extent; give "
                          "only cells.region")
    table = region["table"]
    config["region"] = {k: v for k, v in region.items() if k != "table"}
    if table == "global":
        config["cells"] = {**(cells if isinstance(cells, Mapping) else {}),
                           "region": "global"}
        return ["config key 'region.table' is deprecated: write cells.region: global"]
    return ["config key 'region.table' is deprecated: region is the default (the table "
            "has the movie's cells); remove it"]


def coerce_dates(config: dict) -> None:
    """Write the dates YAML reads in ``time_range`` as the text they were, in place.

    YAML reads ``1990-06-01`` as a date (``2000-01-01 12:00:00`` as a date-time);
    ``time_range`` takes text, in the file's own calendar.
    """
    import datetime

    value = config.get("time_range")
    if isinstance(value, list):
        config["time_range"] = [
            (v.isoformat(sep=" ") if isinstance(v, datetime.datetime) else v.isoformat())
            if isinstance(v, datetime.date) else v for v in value]


def check_colours(config: Mapping) -> None:
    """Check ``cmap`` and a configured ``vmin``/``vmax`` pair before any job runs.

    A colormap name is otherwise first looked up by the calibrate_render job, and a
    ``vmin`` at or above ``vmax`` would silently give a one-colour movie.

    Raises
    ------
    NcreelError
        ``cmap`` not a matplotlib colormap, or both limits set with ``vmin >= vmax``.
    """
    import matplotlib  # parse time only; the colormap registry needs no backend

    cmap = config.get("cmap")
    if cmap not in matplotlib.colormaps:
        close = sorted(n for n in matplotlib.colormaps
                       if str(cmap).lower() in n.lower() and not n.endswith("_r"))[:5]
        raise NcreelError(f"config key 'cmap' = {cmap!r} is not a matplotlib colormap: use "
                          "e.g. viridis, magma, RdBu_r, coolwarm"
                          + (f" (similar: {', '.join(close)})" if close else ""))
    vmin, vmax = config.get("vmin"), config.get("vmax")
    if vmin is not None and vmax is not None and vmin >= vmax:
        raise NcreelError(f"config keys 'vmin' = {vmin} and 'vmax' = {vmax}: vmin must be "
                          "below vmax (or set one of them to null for the series' percentile)")


def _yaml_scalar(text: str):
    """`text` as YAML reads a plain scalar: 180 -> 180, true -> True, null -> None."""
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value if value is None or isinstance(value, bool | int | float) else text


def coerce_cli_values(config: dict, given: Mapping) -> None:
    """Give nested ``--config`` values their YAML types, in place.

    Snakemake parses ``--config key={a: 1, b: true}`` with YAML's BaseLoader, which keeps
    every nested scalar a string ('1', 'true'), and ``--config vmin=null`` as 'null'; the
    same keys in a config file are typed. A top-level 'null' becomes None only where the
    schema allows null (``run=null`` stays a name).
    Only strings that came from the command line (present in `given`, Snakemake's
    ``config_settings.config``) are converted, so a quoted string in a config file stays
    one (``select: {member: "001"}`` is the text 001, ``region: ""`` is refused). Jobs get
    the values already typed (:func:`ncreel.jobs.runconfig.start_run`).

    Parameters
    ----------
    config : dict
        The merged config, changed in place.
    given : mapping
        The ``--config`` values as Snakemake parsed them.
    """
    def walk(value, raw):
        if isinstance(value, dict) and isinstance(raw, Mapping):
            return {k: walk(v, raw[k]) if k in raw else v for k, v in value.items()}
        if isinstance(value, list) and isinstance(raw, list) and len(raw) == len(value):
            return [walk(v, r) for v, r in zip(value, raw, strict=True)]
        if isinstance(value, str) and value == raw:
            return _yaml_scalar(value)
        return value

    props = load_schema()["properties"]
    for key, raw in given.items():
        if key in config and isinstance(raw, Mapping | list):
            config[key] = walk(config[key], raw)
        elif (isinstance(raw, str) and config.get(key) == raw and _yaml_scalar(raw) is None
              and "null" in props.get(key, {}).get("type", [])):
            # `--config table=null` (the default, spelled out) arrives as the string 'null'
            # (Snakemake's top-level parsing); where null is allowed it means null.
            config[key] = None


def reporting_only(argv: list[str]) -> bool:
    """Return whether a Snakemake command line asks for a report only.

    That is ``--report``, without ``--report-after-run`` (which runs the workflow first).
    """
    report = any(a == "--report" or a.startswith("--report=") for a in argv[1:])
    return report and "--report-after-run" not in argv


def report_before_results(argv: list[str], outputs: list[str]) -> str | None:
    """Return the first of `outputs` missing when `argv` asks only for ``--report``.

    ``snakemake --report`` of a run that has not produced its results stops with
    Snakemake's multi-line WorkflowError; ``--report-after-run`` runs the workflow first.
    """
    if not reporting_only(argv):
        return None
    return next((o for o in outputs if not Path(o).exists()), None)


#: Keys that make a run file describe a run of its own (config/config.yaml sets them, and
#: ``run: demo``, for the demo).
OWN_RUN_KEYS = ("input", "variable")


def check_run_named(configfiles: Sequence, overrides: Mapping | None = None) -> None:
    """Stop a run file that names its own input or variable but no ``run``.

    ``config/config.yaml`` (the demo's) is read first, so such a file would run as
    ``run: demo``: into ``results/demo/`` and the table ``ncreel_demo``, replacing the
    demo's results with another data set's, without a word.

    Parameters
    ----------
    configfiles : sequence of path
        The command's ``--configfile`` files (YAML or JSON), in order.
    overrides : mapping, optional
        The command's ``--config`` values; a ``run`` among them names the run too. Values
        given only with ``--config`` (no run file) are not checked.

    Raises
    ------
    NcreelError
        When a run file sets ``input`` or ``variable`` and neither a run file nor
        ``--config`` sets ``run``; the message names the file and the key to add.
    """
    import yaml

    if "run" in (overrides or {}):
        return
    own = []
    for path in configfiles:
        try:
            doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue  # Snakemake itself reports a run file it cannot read
        if not isinstance(doc, Mapping):
            continue
        if "run" in doc:
            return
        if any(key in doc for key in OWN_RUN_KEYS):
            own.append(str(path))
    if own:
        raise NcreelError(
            f"run file {own[0]} sets input/variable but no run: it would run as the demo "
            "(results/demo/, table ncreel_demo) and replace the demo's results; add a line "
            "`run: NAME` (outputs then go to results/NAME/)")
