#!/usr/bin/env bash
# Creates the virtualenv VENV (default .venv) with a working pip, without root:
#
#   1. the Python: $PYTHON if set, else the first of python3, python3.14 ... python3.11 on PATH
#      that is >= 3.11 (`module load conda` puts one on PATH on NCAR's and most clusters);
#   2. `python -m venv`; where the Python has no ensurepip (Debian/Ubuntu without the
#      python3.X-venv package, which needs root), `python -m venv --without-pip` and pip's
#      own wheel fetched from the package index (PIP_INDEX_URL or pip.conf's index-url, else
#      PyPI; sha256 checked) installs pip into the virtualenv.
#
# Installing ncreel into it is the Makefile's part (make venv / demo / test / bench).
set -euo pipefail
VENV=${VENV:-.venv}

say() { echo "ncreel: $*"; }
die() { echo "ncreel: error: $*" >&2; exit 1; }

new_enough() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; }

if [ -n "${PYTHON:-}" ]; then
    command -v "$PYTHON" >/dev/null 2>&1 || die "PYTHON=$PYTHON: no such program." \
        "Name a Python >= 3.11, e.g. make demo PYTHON=\$(which python3.11)," \
        "or on a cluster run 'module load conda' and make demo without PYTHON="
    new_enough "$PYTHON" || die "PYTHON=$PYTHON is $("$PYTHON" -V 2>&1); ncreel needs" \
        "Python >= 3.11: name a newer one (make demo PYTHON=/path/to/python3.11)," \
        "or on a cluster run 'module load conda' and make demo without PYTHON="
    py=$PYTHON
else
    py=
    for cand in python3 python3.14 python3.13 python3.12 python3.11; do
        if command -v "$cand" >/dev/null 2>&1 && new_enough "$cand"; then py=$cand; break; fi
    done
    if [ -z "$py" ]; then
        found="no python3"
        if command -v python3 >/dev/null 2>&1; then
            found="python3 = $(python3 -V 2>&1)"; found=${found%%$'\n'*}
        fi
        die "ncreel needs Python >= 3.11; PATH has $found. Without root:" \
            "'module load conda' (NCAR Derecho/Casper; other sites: module avail python)," \
            "or any Python >= 3.11 you have: make demo PYTHON=/path/to/python3." \
            "With root (Debian/Ubuntu): apt-get install python3"
    fi
fi
say "Python: $(command -v "$py") ($("$py" -V 2>&1))"

if "$py" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    say "creating the virtualenv $VENV"
    "$py" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
else
    # Debian/Ubuntu split ensurepip off into python3.X-venv; without it `venv` still
    # creates an environment when asked not to install pip, and pip installs itself
    # from its own wheel (a wheel is importable: python pip.whl/pip install ...).
    ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    say "$py has no ensurepip (Debian package python$ver-venv is not installed); creating" \
        "$VENV without it and installing pip from the package index (no root needed)"
    "$py" -m venv --without-pip "$VENV" \
        || die "$py -m venv --without-pip $VENV failed. Without root: 'module load conda'" \
            "or make demo PYTHON=/path/to/another/python3; with root: apt-get install python$ver-venv"
    "$VENV/bin/python" - <<'EOF' || { rm -rf "$VENV"; exit 1; }
import configparser, hashlib, html.parser, os, re, ssl, subprocess, sys, tempfile
import urllib.parse, urllib.request

def index_url():
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    files = [os.environ.get("PIP_CONFIG_FILE", ""), "/etc/pip.conf",
             os.path.expanduser("~/.config/pip/pip.conf"), os.path.expanduser("~/.pip/pip.conf")]
    url = "https://pypi.org/simple"
    for f in files:  # later files override earlier ones, as in pip
        cp = configparser.ConfigParser()
        if f and os.path.isfile(f):
            cp.read(f)
            url = cp.get("global", "index-url", fallback=url)
    return url

class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs = []
    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href"]

cafile = os.environ.get("PIP_CERT") or None
ctx = ssl.create_default_context(cafile=cafile)
page = index_url().rstrip("/") + "/pip/"
try:
    with urllib.request.urlopen(page, context=ctx, timeout=60) as r:
        text = r.read().decode()
except OSError as err:
    sys.exit(f"ncreel: error: cannot read {page} ({err}). Set PIP_INDEX_URL to your site's "
             "package index (and PIP_CERT to its CA bundle), or use a Python that has pip "
             "(module load conda; make demo PYTHON=/path/to/python3)")
p = Links()
p.feed(text)
wheels = {}
for href in p.hrefs:
    m = re.search(r"/pip-(\d+(?:\.\d+)*)-py3-none-any\.whl(#sha256=([0-9a-f]{64}))?$", href)
    if m:  # final releases only (no a/b/rc/dev in the version)
        wheels[tuple(int(x) for x in m.group(1).split("."))] = (href, m.group(3))
if not wheels:
    sys.exit(f"ncreel: error: no pip wheel listed at {page}")
version = max(wheels)
href, sha = wheels[version]
url = urllib.parse.urljoin(page, href.split("#")[0])
print(f"ncreel: bootstrapping pip {'.'.join(map(str, version))} from {url}", flush=True)
with urllib.request.urlopen(url, context=ctx, timeout=120) as r:
    data = r.read()
if sha and hashlib.sha256(data).hexdigest() != sha:
    sys.exit(f"ncreel: error: {url} does not match its sha256 in the index")
with tempfile.TemporaryDirectory() as tmp:
    whl = os.path.join(tmp, url.rsplit("/", 1)[1])
    with open(whl, "wb") as f:
        f.write(data)
    subprocess.run([sys.executable, os.path.join(whl, "pip"), "install", "--quiet",
                    "--no-cache-dir", whl], check=True)
EOF
fi
"$VENV/bin/python" -m pip --version >/dev/null || die "pip does not run in $VENV"
