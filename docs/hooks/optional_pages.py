"""MkDocs hook: pages that other parts of the project add join the site once they exist.

A page in OPTIONAL joins the navigation after the first page of its list that is there,
when its file exists and the nav in mkdocs.yml does not list it already. While the file
does not exist, links to it in other pages are written as plain text, so the strict build
neither fails on the missing page nor lets a link to an existing page go unchecked.
"""

from __future__ import annotations

import re
from pathlib import Path

#: file -> (navigation title, pages to follow, first present wins)
OPTIONAL = {
    "install.md": ("Installation", ["index.md"]),
    "grids.md": ("Grid kinds", ["inputs.md"]),
    "meshes.md": ("Unstructured meshes", ["grids.md", "inputs.md"]),
    "reliability.md": ("Reliability and security", ["running.md"]),
}


def _nav_files(nav):
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        if isinstance(value, list):
            yield from _nav_files(value)
        else:
            yield value


def _insert_after(nav, targets, item) -> bool:
    for target in targets:
        for i, entry in enumerate(nav):
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            if value == target:
                nav.insert(i + 1, item)
                return True
    return False


def on_config(config):
    """Add each optional page whose file exists to the navigation."""
    docs = Path(config["docs_dir"])
    nav = config["nav"]
    for name, (title, after) in OPTIONAL.items():
        if nav is None or not (docs / name).is_file() or name in set(_nav_files(nav)):
            continue
        if not _insert_after(nav, after, {title: name}):
            nav.append({title: name})
    return config


def on_page_markdown(markdown, page, config, files):
    """Write links to optional pages that do not exist yet as their text."""
    for name in OPTIONAL:
        if files.get_file_from_path(name) is None:
            link = r"\[([^\]]+)\]\((?:\.\./)*" + re.escape(name) + r"(?:#[^)]*)?\)"
            markdown = re.sub(link, r"\1", markdown)
    return markdown
