"""Screenshot of one page of a Snakemake HTML report, with headless Chromium.

``python -m ncreel.report.screenshot results/demo/report.html docs/report-resources.png``
(``make report-screenshot``). The report is a single-page app; a copy of it gets one
``<script>`` that does what a click on the result does (open its category, show the
result), then Chromium renders it headless and saves the PNG. Nothing else in the report
changes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: Chromium flags for an unattended, offline, throw-away browser.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--hide-scrollbars"]

_SHOW = """<script>
window.addEventListener("load", function () {{ setTimeout(function () {{
  var key = Object.keys(results).find(function (k) {{ return k.endsWith({suffix}); }});
  app.showCategory({category});
  app.setView({{content: {content}, contentPath: results[key].data_uri, resultPath: key}});
}}, 300); }});
</script>
"""


def find_chromium() -> str:
    """Path of ``chromium`` (Debian) or ``chromium-browser``/``google-chrome``.

    Raises
    ------
    FileNotFoundError
        If none is installed (Debian: ``apt-get install -y chromium``).
    """
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise FileNotFoundError("ncreel: error: no chromium found: apt-get install -y chromium")


def screenshot(report: str | os.PathLike, png: str | os.PathLike, *,
               result: str = "resources.html", category: str = "Resources",
               size: tuple[int, int] = (1500, 820), chromium: str | None = None) -> Path:
    """Save a PNG of the report showing `result` (a file name ending) of `category`.

    Parameters
    ----------
    report : path
        HTML report written by ``snakemake --report``.
    png : path
        Output PNG, `size` pixels (width, height).
    result : str
        End of the result's path in the report, e.g. ``resources.html``.
    category : str
        The report category holding it.
    chromium : str, optional
        Browser executable (default: :func:`find_chromium`).

    Raises
    ------
    subprocess.CalledProcessError
        If Chromium fails; FileNotFoundError if no PNG was written.
    """
    chromium = chromium or find_chromium()
    content = "html" if result.endswith(".html") else "img"
    html = Path(report).read_text(errors="replace")
    show = _SHOW.format(suffix=json.dumps(result), category=json.dumps(category),
                        content=json.dumps(content))
    cut = html.rfind("</body>")
    html = html[:cut] + show + html[cut:] if cut >= 0 else html + show
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ncreel-shot-") as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(html)
        subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp}/profile",
                        f"--window-size={size[0]},{size[1]}", "--virtual-time-budget=15000",
                        f"--screenshot={png}", page.as_uri()],
                       check=True, capture_output=True, timeout=300)
    if not png.is_file():
        raise FileNotFoundError(f"chromium wrote no screenshot to {png}")
    return png


def main(argv: list[str] | None = None) -> int:
    """Command line: report.html, output PNG, optional --result/--category."""
    ap = argparse.ArgumentParser(prog="python -m ncreel.report.screenshot")
    ap.add_argument("report")
    ap.add_argument("png")
    ap.add_argument("--result", default="resources.html")
    ap.add_argument("--category", default="Resources")
    args = ap.parse_args(argv)
    print(screenshot(args.report, args.png, result=args.result, category=args.category))
    return 0


if __name__ == "__main__":
    sys.exit(main())
