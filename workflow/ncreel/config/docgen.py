"""Configuration reference pages generated from the config schema, so they cannot drift.

``python -m ncreel.config.docgen`` writes ``docs/configuration.md`` (the documentation site) and
``config/README.md`` (what the Snakemake workflow catalog shows) from
``workflow/schemas/config.schema.yaml``; ``python -m ncreel.config.docgen --check`` writes nothing
and exits 1 naming the pages that differ from what the schema gives
(``tests/test_docs.py`` runs it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ncreel.config.configcheck import load_schema, schema_path

#: Header of both pages: where they come from.
GENERATED = ("<!-- Generated from workflow/schemas/config.schema.yaml by "
             "`python -m ncreel.config.docgen` (run `make docs`). "
             "Edit the schema, not this file. -->")

_INTRO = """\
Every setting of a run is listed below. Set them in a run file (YAML) and pass it
with `--configfile my_run.yaml`, or one by one with `--config KEY=VALUE`; a run file is
the better habit, because the same file then drives the run, its resume and its report.
`config/config.yaml` (read first) sets only the required keys, for the demo. Unknown or
mistyped keys stop the run before any job with one line naming the key.

```yaml
# my_run.yaml
input: /glade/derecho/scratch/me/tas_day_*.nc   # a glob: one file or many
variable: tas
run: tas_day
```

Nested settings (`map`, `cells`, `database`) are easiest in the run file; on the command
line they are written in YAML's flow style, e.g. `--config 'map={projection: Robinson}'`.
"""


def _escape(text: str) -> str:
    """Markdown-safe prose: `<run>` is a placeholder, not an HTML tag; `*` is not emphasis."""
    return " ".join(text.split()).replace("<", "&lt;").replace(">", "&gt;").replace("*", r"\*")


def _value(value) -> str:
    """Return a default or enum value as YAML would spell it, in code style."""
    if value is None:
        return "`null`"
    if value is True or value is False:
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value == float("inf"):
        return "`.inf`"
    if isinstance(value, str):
        return f"`{value}`" if value else '`""`'
    return f"`{json.dumps(value)}`"


def _type(prop: dict) -> str:
    """Return the JSON schema type of `prop` in words, with its items, enum and bounds."""
    types = prop.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    words = {"string": "string", "integer": "integer", "number": "number", "boolean": "boolean",
             "array": "list", "object": "mapping", "null": "null"}
    kind = " or ".join(words.get(t, t) for t in types) or "any"
    items = prop.get("items", {})
    if "array" in types and items.get("type"):
        of = items["type"] if isinstance(items["type"], list) else [items["type"]]
        kind = kind.replace("list", "list of " + " or ".join(f"{words.get(t, t)}s"
                                                             for t in of))
    parts = [kind]
    if "enum" in prop:
        parts.append("one of " + ", ".join(_value(v) for v in prop["enum"]))
    bounds = [(f"≥ {prop['minimum']}" if "minimum" in prop else None),
              (f"> {prop['exclusiveMinimum']}" if "exclusiveMinimum" in prop else None),
              (f"≤ {prop['maximum']}" if "maximum" in prop else None),
              (f"{prop['minItems']} items" if prop.get("minItems") == prop.get("maxItems")
               and "minItems" in prop else None),
              (f"at least {prop['minLength']} character" if "minLength" in prop else None)]
    parts += [b for b in bounds if b]
    if "pattern" in prop:
        parts.append(f"matching `{prop['pattern']}`")
    return "; ".join(parts)


def _entries(schema: dict, prefix: str = "") -> list[tuple[str, dict]]:
    """(dotted key, property) of `schema`'s properties, each followed by its nested ones.

    The keys of a list's items are ``list[].key`` (``panels[].input``).
    """
    out = []
    if prefix and isinstance(schema.get("items"), dict):  # `schema` is a list's
        out += _entries(schema["items"], f"{prefix[:-1]}[].")
    for name, prop in schema.get("properties", {}).items():
        key = f"{prefix}{name}"
        out.append((key, prop))
        out += _entries(prop, f"{key}.")
    return out


def _section(key: str, prop: dict, required: bool) -> list[str]:
    default = ("required, no default" if required
               else _value(prop["default"]) if "default" in prop else "unset")
    return [f"### `{key}`", "",
            f"*{_type(prop)}* · default: {default}", "",
            _escape(prop.get("description", "")), ""]


def _summary(rows: list[tuple[str, dict, bool]]) -> list[str]:
    lines = ["| key | type | default |", "| --- | --- | --- |"]
    for key, prop, required in rows:
        default = "**required**" if required else _value(prop.get("default", None))
        anchor = key.replace(".", "")
        lines.append(f"| [`{key}`](#{anchor}) | {_type(prop).split(';')[0]} | {default} |")
    return lines


def reference(schema: dict | None = None, *, heading: str = "# Configuration") -> str:
    """Return the configuration reference (Markdown) of the config schema.

    Parameters
    ----------
    schema : dict, optional
        The parsed config schema; default ``workflow/schemas/config.schema.yaml``.
    heading : str
        First line of the page.

    Returns
    -------
    str
        The page: an introduction, a summary table of every top-level key, then one
        section per key (nested keys dotted, e.g. ``cells.model``) with its type, allowed
        values, default and the schema's description; ``etr_risk``'s parameters last.
    """
    schema = load_schema() if schema is None else schema
    required = set(schema.get("required", []))
    top = [(k, p, k in required) for k, p in schema["properties"].items()]
    lines = [heading, "", GENERATED, "", _escape(schema.get("description", "")), "",
             _INTRO, "## All keys", "", *_summary(top), "", "## Keys", ""]
    for key, prop, req in top:
        lines += _section(key, prop, req)
        lines += [x for sub_key, sub in _entries(prop, f"{key}.")
                  for x in _section(sub_key, sub, False)]
    etr = schema.get("$defs", {}).get("etr_params")
    if etr:
        lines += ["## `cells.params` of the `etr_risk` model", "",
                  _escape(etr.get("description", "")), ""]
        lines += [x for sub_key, sub in _entries(etr, "cells.params.")
                  for x in _section(sub_key, sub, False)]
    return "\n".join(lines).rstrip() + "\n"


def pages(root: Path) -> dict[Path, str]:
    """Return {path: text} of the generated pages under the repository `root`."""
    catalog_intro = ("This folder holds the run settings of the workflow. "
                     "`config.yaml` sets the demo's input; copy the three required keys into "
                     "a run file of your own (see below). The same reference is part of the "
                     "documentation site (`docs/configuration.md`).")
    return {
        root / "docs" / "configuration.md": reference(),
        root / "config" / "README.md": reference(heading="# Configuring ncreel").replace(
            GENERATED + "\n", GENERATED + "\n\n" + catalog_intro + "\n", 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` compare) the generated pages; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m ncreel.config.docgen", description=__doc__)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a committed page differs")
    parser.add_argument("--root", type=Path, default=schema_path().parents[2],
                        help="repository root (default: the one holding this package)")
    args = parser.parse_args(argv)
    stale = []
    for path, text in pages(args.root).items():
        current = path.read_text() if path.is_file() else None
        if current == text:
            continue
        if args.check:
            stale.append(str(path.relative_to(args.root)))
        else:
            path.write_text(text)
            print(f"ncreel: wrote {path.relative_to(args.root)}")
    if stale:
        print(f"ncreel: error: {', '.join(stale)} differ from "
              "workflow/schemas/config.schema.yaml: run `make docs` (or "
              "python -m ncreel.config.docgen) and commit the result", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
