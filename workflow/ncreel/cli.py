"""The ``ncreel`` command: settings help and a run file to edit, beside ``snakemake``.

``ncreel`` does not run the workflow (``snakemake --profile ... --configfile FILE`` does);
it says what can be set and writes the file to set it in::

    ncreel --help              what ncreel can do, and every setting with its default
    ncreel settings [KEY]      the settings with their full meaning (KEY: one, e.g. map)
    ncreel config [-o FILE]    a commented run file to edit (default: my_run.yaml)
    ncreel status [RUN]        which shards of a run are done, running, failed, interrupted, to do
    ncreel inspect FILE [VAR]  what the workflow will make of a file (and a preview frame)

Everything it says comes from ``workflow/schemas/config.schema.yaml``, the one place
settings and their defaults are defined, so it cannot drift from what the workflow checks.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path

from ncreel.config.configcheck import load_schema

#: Keys every run names (config/config.yaml sets them for the demo).
REQUIRED_KEYS = ("input", "variable", "run")
#: Width of the text ncreel prints and writes.
WIDTH = 88


def _type_text(node: Mapping) -> str:
    types = node.get("type", "object")
    types = [types] if isinstance(types, str) else list(types)
    if "enum" in node:
        return " | ".join("null" if v is None else str(v) for v in node["enum"])
    return " or ".join(types)


def _default_text(node: Mapping) -> str:
    if "default" not in node:
        return "unset"
    # Compact (["movie","table"]): one word in the --help table.
    return json.dumps(node["default"], separators=(",", ":")) \
        if not isinstance(node["default"], str) else node["default"]


def _first_sentence(text: str) -> str:
    text = " ".join(str(text).split())
    # A full stop before a space ends it, except in an abbreviation (e.g., i.e.).
    m = re.search(r"(?<!e\.g)(?<!i\.e)\. ", text)
    return text if m is None else text[:m.start() + 1]


def iter_settings(schema: Mapping | None = None, prefix: str = "") -> Iterator[tuple]:
    """Every setting of the config schema, nested ones as ``parent.child``.

    Parameters
    ----------
    schema : mapping, optional
        An object schema (default: the whole config schema).
    prefix : str
        Dotted path of `schema` (``""`` at the top).

    Yields
    ------
    key : str
        Dotted key, e.g. ``map.projection``; a list's items ``panels[].input``.
    node : dict
        Its schema (``type``, ``default``, ``description``, ...).
    """
    schema = load_schema() if schema is None else schema
    for name, node in schema.get("properties", {}).items():
        key = f"{prefix}{name}"
        yield key, node
        if node.get("type") == "object" and "properties" in node:
            yield from iter_settings(node, f"{key}.")
        if isinstance(node.get("items"), dict) and "properties" in node["items"]:
            yield from iter_settings(node["items"], f"{key}[].")  # panels[].input


def settings_summary(width: int = WIDTH) -> str:
    """One line per top-level setting: key, default and the first sentence of its meaning."""
    lines = []
    for key, node in iter_settings():
        if "." in key:
            continue
        default = "(required)" if key in REQUIRED_KEYS else _default_text(node)
        head = f"  {key:<22} {default:<14} "
        text = _first_sentence(node.get("description", ""))
        wrapped = textwrap.wrap(text, width - len(head)) or [""]
        lines.append(head + wrapped[0])
        lines.extend(" " * len(head) + rest for rest in wrapped[1:])
    return "\n".join(lines)


def settings_detail(key: str | None = None, width: int = WIDTH) -> str:
    """Full meaning, type and default of every setting, or of `key` and those under it.

    Raises
    ------
    KeyError
        If `key` is not a setting (the message suggests close names).
    """
    found = [(k, n) for k, n in iter_settings()
             if key is None or k == key or k.startswith(f"{key}.")]
    if not found:
        from ncreel.config.configcheck import close_keys

        close = close_keys(str(key))
        raise KeyError(f"'{key}' is not a setting"
                       + (f"; did you mean {' or '.join(repr(c) for c in close)}?"
                          if close else "; `ncreel settings` lists them all"))
    out = []
    for k, node in found:
        default = "(required)" if k in REQUIRED_KEYS else _default_text(node)
        out.append(f"{k}  [{_type_text(node)}; default {default}]")
        text = " ".join(str(node.get("description", "")).split())
        out.extend(textwrap.wrap(text, width, initial_indent="    ",
                                 subsequent_indent="    "))
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def run_file(*, input: str = "data/*.nc", variable: str = "tas", run: str = "my_run",
             width: int = WIDTH) -> str:
    """Text of a commented run file: the required keys set, every other key commented out.

    Each setting is preceded by its meaning and shown with its default, so the file is a
    complete reference that ``--configfile`` reads as it is (the commented keys keep their
    defaults).

    Parameters
    ----------
    input, variable, run : str
        Values for the three keys every run names.

    Returns
    -------
    str
        YAML text.
    """
    import yaml

    def comment(text: str, indent: str) -> list[str]:
        text = " ".join(str(text).split())
        return [f"{indent}# {line}" for line in textwrap.wrap(text, width - len(indent) - 2)]

    def block(schema: Mapping, indent: str, commented: bool) -> list[str]:
        out = []
        for name, node in schema.get("properties", {}).items():
            if not indent:
                out.append("")
            out.extend(comment(node.get("description", ""), indent))
            mark = "# " if commented else ""
            if node.get("type") == "object" and "properties" in node:
                out.append(f"{indent}{mark}{name}:")
                out.extend(block(node, indent + "  ", True))
            else:
                value = yaml.safe_dump(node.get("default"), default_flow_style=True,
                                       width=10**6).strip()
                value = value.removesuffix("\n...").removesuffix("...").strip()
                out.append(f"{indent}{mark}{name}: {value}")
        return out

    given = {"input": input, "variable": variable, "run": run}
    lines = ["# ncreel run file: edit, then run it with",
             "#   snakemake --profile PROFILE --configfile THIS_FILE",
             "# (add --cores N to run here; the same command resumes the run, and",
             "# ncreel status and snakemake --report take the same --configfile). Every",
             "# setting is listed with its default; uncomment",
             "# a line to change it. `ncreel settings KEY` explains one in full.", ""]
    schema = load_schema()
    rest = {"properties": {k: v for k, v in schema["properties"].items()
                           if k not in REQUIRED_KEYS}}
    for key in REQUIRED_KEYS:
        lines.extend(comment(schema["properties"][key].get("description", ""), ""))
        lines.append(f"{key}: {yaml.safe_dump(given[key], default_style=None).strip()}"
                     .removesuffix("\n..."))
    lines.extend(block(rest, "", True))
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ncreel",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.fill(
            "ncreel turns a NetCDF time series into a movie and a per-grid-cell PostgreSQL "
            "table. Runs are started with snakemake (e.g. snakemake --profile derecho "
            "--configfile my_run.yaml); this command explains the settings and writes a "
            "run file to edit.", WIDTH),
        epilog="settings (key, default, meaning; set them in a run file or with "
               "snakemake --config KEY=VALUE):\n" + settings_summary())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser("settings", help="every setting with its full meaning and default")
    p.add_argument("key", nargs="?", help="one setting (e.g. map, cells.geometry)")
    p = sub.add_parser("config", help="write a commented run file to edit")
    p.add_argument("-o", "--output", default="my_run.yaml",
                   help="file to write (default: my_run.yaml; - for standard output)")
    p.add_argument("--input", default="data/*.nc", help="NetCDF file or glob")
    p.add_argument("--variable", default="tas", help="variable to show")
    p.add_argument("--run", default="my_run", help="name of the run")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p = sub.add_parser("inspect", help="what the workflow will make of a file, before any "
                       "job: grid, time axis, rows, a preview frame")
    p.add_argument("file", help="NetCDF file, Zarr store or glob (quote it); or an "
                   "intake-esm catalog's JSON file, searched with --query")
    p.add_argument("variable", nargs="?", help="variable (omit to list them)")
    p.add_argument("--query", action="append", metavar="COLUMN=VALUE",
                   help="catalog column and value, as input.query (repeatable; a column "
                   "given twice takes either value)")
    p.add_argument("--select", action="append", metavar="DIM=INDEX",
                   help="index to take along an extra dimension (repeatable)")
    p.add_argument("--sel", action="append", metavar="DIM=VALUE",
                   help="coordinate value to take along an extra dimension, e.g. "
                        "plev=85000 or 'plev=850 hPa' (repeatable)")
    p.add_argument("--time-range", nargs=2, metavar=("START", "STOP"),
                   help="steps to show, both included: years, YYYY-MM or dates")
    p.add_argument("--time-every", type=int, default=1, metavar="N",
                   help="every Nth of those steps")
    p.add_argument("--outputs", metavar="LIST",
                   help="movie, table or movie,table (default): what the run makes")
    p.add_argument("--time-dim", help="time dimension, when detection cannot decide")
    p.add_argument("--lat", help="latitude variable")
    p.add_argument("--lon", help="longitude variable")
    p.add_argument("--time", help="time variable")
    p.add_argument("--preview", help="PNG of the middle step (default: VARIABLE_preview.png)")
    p.add_argument("--no-preview", action="store_true", help="draw no frame")
    p = sub.add_parser("status", help="which shards of a run are done, running, failed, "
                                      "interrupted or to do")
    p.add_argument("run", nargs="?", help="run name (default: the run file's, else the last "
                   "run made in --workdir, else demo)")
    p.add_argument("--configfile", help="the run file the run was started with")
    p.add_argument("--workdir", default=".", help="where snakemake runs (default: .)")
    return parser


def _say_if_settings_changed(configfile: str, loaded: dict, run: str, workdir: Path) -> None:
    # The states are those of the settings the run last ran with: a run file edited
    # since (another time_range...) is a run Snakemake will partly redo.
    from ncreel.run.lastrun import RECORD_DIR, differing_keys, read_record

    record = read_record(workdir / RECORD_DIR / f"{run}.json")
    if record is None:
        return
    changed = [k for k in differing_keys(loaded, record["config"])
               if k not in ("input", "variable", "run") or k in loaded]
    if changed:
        print(f"ncreel: note: {configfile} differs from the settings run '{run}' last ran "
              f"with ({', '.join(changed)}): the states below are that run's; `snakemake -n "
              f"--configfile {configfile}` lists the jobs the new settings redo",
              file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Run the ``ncreel`` command; return its exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    if args.command == "settings":
        try:
            sys.stdout.write(settings_detail(args.key))
        except KeyError as err:
            print(f"ncreel: error: {err.args[0]}", file=sys.stderr)
            return 2
        return 0
    if args.command == "config":
        text = run_file(input=args.input, variable=args.variable, run=args.run)
        if args.output == "-":
            sys.stdout.write(text)
            return 0
        out = Path(args.output)
        if out.exists() and not args.force:
            print(f"ncreel: error: {out} exists: choose another name with -o, or --force",
                  file=sys.stderr)
            return 2
        out.write_text(text)
        print(f"ncreel: wrote {out}: edit input, variable and run, then "
              f"snakemake --profile PROFILE --configfile {out} (or --cores N to run here)")
        return 0
    if args.command == "inspect":
        from ncreel.jobs.preflight import main as inspect_main

        return inspect_main(args)
    from ncreel.cluster import runstatus

    run, loaded = args.run, None
    if args.configfile:
        import yaml

        from ncreel.config.configcheck import check_run_named
        from ncreel.core.errors import NcreelError

        try:
            loaded = yaml.safe_load(Path(args.configfile).read_text()) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
            print(f"ncreel: error: --configfile {args.configfile}: cannot read it as YAML "
                  f"({str(err).splitlines()[0]}): give the run file (a .yaml of config "
                  "keys) the run was started with", file=sys.stderr)
            return 2
        if not isinstance(loaded, dict):
            print(f"ncreel: error: --configfile {args.configfile}: not a run file (YAML "
                  f"of config keys such as run: and input:, it holds a "
                  f"{type(loaded).__name__}): give the run file the run was started with",
                  file=sys.stderr)
            return 2
        run = args.run if args.run is not None else loaded.get("run")
        if run is None:  # as snakemake --configfile: refused, or the demo's run
            try:
                check_run_named([args.configfile])
            except NcreelError as err:
                print(f"ncreel: error: {err}", file=sys.stderr)
                return 2
            run = "demo"
    if not Path(args.workdir).is_dir():
        print(f"ncreel: error: --workdir {args.workdir}: no such directory: give the "
              "directory the run's snakemake command ran in", file=sys.stderr)
        return 2
    if loaded is not None:
        _say_if_settings_changed(args.configfile, loaded, str(run), Path(args.workdir))
    if run is None:
        from ncreel.run.lastrun import LAST, RECORD_DIR, read_record

        last = read_record(Path(args.workdir) / RECORD_DIR / LAST)
        if last is not None:
            run = last["run"]
            print(f"ncreel: the last run made in {args.workdir}: {run}", file=sys.stderr)
    return runstatus.main(["--run", str(run or "demo"), "--workdir", args.workdir])


if __name__ == "__main__":
    sys.exit(main())
