"""Config defaults live in one place, the schema: a default written anywhere else fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml
from ncreel.cells import ETR_DEFAULTS
from ncreel.config.configcheck import (
    RENAMED_KEYS,
    load_schema,
    schema_defaults,
    upgrade_renamed_keys,
)
from ncreel.core.errors import NcreelError

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = load_schema()
#: Defaults too plain to tell a copy from an unrelated literal.
PLAIN = (None, True, False, 0, 1, "", "none")


def schema_properties(node=SCHEMA, path=()):
    """Yield (dotted path, property schema) of every property, nested ones and $defs too."""
    for name, sub in node.get("properties", {}).items():
        yield ".".join((*path, name)), sub
        yield from schema_properties(sub, (*path, name))
    for name, sub in node.get("$defs", {}).items():
        yield from schema_properties(sub, ("cells", "params") if name == "etr_params" else (name,))


DEFAULTS = {path: sub["default"] for path, sub in schema_properties() if "default" in sub}


def leaves(mapping, path=()):
    """Yield (dotted path, value) of every leaf of a nested mapping."""
    for key, value in mapping.items():
        if isinstance(value, dict) and value:
            yield from leaves(value, (*path, key))
        else:
            yield ".".join((*path, key)), value


def test_config_yaml_sets_only_keys_without_a_default():
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    assert set(config) == set(SCHEMA["required"])
    doubled = [k for k, _ in leaves(config) if k in DEFAULTS]
    assert not doubled, f"config/config.yaml repeats schema defaults of {doubled}"


def test_commented_examples_in_config_yaml_show_the_schema_defaults():
    """`# key: value` lines document defaults; they must say what the schema says."""
    stack, shown = [], {}
    for line in (ROOT / "config/config.yaml").read_text().splitlines():
        m = re.match(r"^# ( *)([a-z_]+):(.*?)(\s+#.*)?$", line)
        if not m:
            continue
        depth = len(m.group(1)) // 2
        stack[depth:] = [m.group(2)]
        if m.group(3).strip():
            shown[".".join(stack)] = yaml.safe_load(m.group(3))
    assert len(shown) >= 10
    wrong = {k: (v, DEFAULTS.get(k, "<no default>")) for k, v in shown.items()
             if DEFAULTS.get(k, object()) != v}
    assert not wrong, f"config/config.yaml comments disagree with the schema: {wrong}"


def test_etr_defaults_are_the_schema_defaults():
    assert ETR_DEFAULTS == schema_defaults("$defs", "etr_params")
    assert set(ETR_DEFAULTS) == set(SCHEMA["$defs"]["etr_params"]["properties"])


def _literal(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _literal


def _distinct(value, default):
    return type(value) is type(default) and value == default and default not in PLAIN \
        and default not in ({}, [])


def test_no_schema_default_is_written_in_code():
    """`key: <default>`, `key=<default>` or `.get("key", <anything but None>)` in the
    package, scripts, rules or Snakefile would be a second default for a config key."""
    by_name = {}
    for path, default in DEFAULTS.items():
        by_name.setdefault(path.rsplit(".", 1)[-1], []).append(default)
    found = []
    sources = [*sorted((ROOT / "workflow").rglob("*.py")),
               *sorted((ROOT / "workflow/rules").glob("*.smk")), ROOT / "Snakefile"]
    for src in sources:
        if src.suffix != ".py":
            continue  # .smk is not Python; its literals are checked by the regex below
        tree = ast.parse(src.read_text())
        for node in ast.walk(tree):
            pairs = []
            if isinstance(node, ast.Dict):
                pairs = [(k.value, v) for k, v in zip(node.keys, node.values, strict=True)
                         if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            elif isinstance(node, ast.Call):
                pairs = [(kw.arg, kw.value) for kw in node.keywords if kw.arg]
                if (isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                        and len(node.args) == 2 and isinstance(node.args[0], ast.Constant)
                        and node.args[0].value in by_name
                        and _literal(node.args[1]) is not None):
                    found.append(f"{src.relative_to(ROOT)}:{node.lineno} .get"
                                 f"({node.args[0].value!r}, ...)")
            elif (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or)
                  and isinstance(node.values[0], ast.Call)
                  and isinstance(node.values[0].func, ast.Attribute)
                  and node.values[0].func.attr == "get" and node.values[0].args
                  and isinstance(node.values[0].args[0], ast.Constant)
                  and node.values[0].args[0].value in by_name
                  and any(_distinct(_literal(node.values[-1]), d)
                          for d in by_name[node.values[0].args[0].value])):
                found.append(f"{src.relative_to(ROOT)}:{node.lineno} .get"
                             f"({node.values[0].args[0].value!r}) or ...")
            for key, value in pairs:
                if any(_distinct(_literal(value), d) for d in by_name.get(key, ())):
                    found.append(f"{src.relative_to(ROOT)}:{node.lineno} {key}")
    for src in sources:
        for n, line in enumerate(src.read_text().splitlines(), 1):
            m = re.search(r"config\[\"(\w+)\"\]\s*(?:or|if)|config\.get\(\"(\w+)\", *[^N)]",
                          line)
            if src.suffix != ".py" and m:
                found.append(f"{src.relative_to(ROOT)}:{n} {m.group(0)}")
    assert not found, f"schema defaults written again: {found}"


def test_renamed_key_still_works_with_one_note():
    config = {"render_threads": 2, "run": "r"}
    assert upgrade_renamed_keys(config) == [
        "config key 'render_threads' is deprecated: call it 'render_processes'"]
    assert config == {"render_processes": 2, "run": "r"}
    assert upgrade_renamed_keys(config) == []  # once: the key is gone
    with pytest.raises(NcreelError, match="both set"):
        upgrade_renamed_keys({"render_threads": 2, "render_processes": 3})
    assert set(RENAMED_KEYS.values()) <= set(SCHEMA["properties"])
    assert not set(RENAMED_KEYS) & set(SCHEMA["properties"])
