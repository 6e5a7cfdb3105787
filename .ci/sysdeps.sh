#!/usr/bin/env bash
# What ncreel needs from the system, installed with apt-get where missing (as root, or with
# sudo), or else named with the exact command to run. One line per missing piece.
#
#   sysdeps.sh venv   a Python >= 3.10 that can create virtualenvs   (make venv, make demo)
#   sysdeps.sh test   + ffmpeg/ffprobe, graphviz, PostgreSQL server and psql, zstd  (make test)
#   sysdeps.sh dag    + graphviz only                                 (make dag)
#
# PYTHON (default python3) names the interpreter the Makefile uses.
set -euo pipefail
mode=${1:-test}
PYTHON=${PYTHON:-python3}
pkgs=()

missing() {  # Debian package, what it gives
    pkgs+=("$1")
    echo "ncreel: missing $2 -> Debian package $1"
}

if ! command -v "$PYTHON" >/dev/null 2>&1; then
    missing python3 "$PYTHON (Python >= 3.10)"
elif ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "ncreel: error: $PYTHON is $("$PYTHON" -V 2>&1); ncreel needs Python >= 3.10:" \
        "run make with PYTHON=python3.X naming a newer one" >&2
    exit 1
elif ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    # Debian and Ubuntu ship venv's pip bootstrap separately, per Python version.
    ver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    missing "python$ver-venv" "$PYTHON's virtualenv support (ensurepip)"
fi

if [ "$mode" = dag ]; then
    command -v dot >/dev/null || missing graphviz "graphviz dot (rule graph pictures)"
fi
if [ "$mode" = test ]; then
    command -v ffprobe >/dev/null || missing ffmpeg "ffmpeg/ffprobe (movie tests)"
    command -v dot >/dev/null || missing graphviz "graphviz dot (rule graph tests)"
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
        || missing postgresql "a PostgreSQL server (tests start a throw-away one)"
    command -v psql >/dev/null || missing postgresql-client "psql (cells.sql tests)"
    command -v zstd >/dev/null || missing zstd "zstd (cells.sql of zstd-compressed shards)"
fi
[ ${#pkgs[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null; then
    echo "ncreel: error: not a Debian/Ubuntu system: install the equivalent of: ${pkgs[*]}" >&2
    exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null; then
    SUDO=(sudo)
else
    echo "ncreel: error: as root, run: apt-get update && apt-get install -y ${pkgs[*]}" \
        "-- then make again" >&2
    exit 1
fi
clusters_before=$(ls -d /etc/postgresql/*/main 2>/dev/null || true)
export DEBIAN_FRONTEND=noninteractive
echo "ncreel: ${SUDO[*]:+${SUDO[*]} }apt-get update"
"${SUDO[@]}" apt-get update -q
echo "ncreel: ${SUDO[*]:+${SUDO[*]} }apt-get install -y ${pkgs[*]} (about 20-60 s)"
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${pkgs[@]}"

# Debian's server package creates and starts a system cluster on port 5432; the tests never
# use it (they start their own on a unix socket), so drop the one this install created.
for dir in $(ls -d /etc/postgresql/*/main 2>/dev/null || true); do
    case "$clusters_before" in *"$dir"*) continue ;; esac
    ver=$(basename "$(dirname "$dir")")
    echo "ncreel: removing the system PostgreSQL cluster $ver/main that apt-get just created"
    "${SUDO[@]}" pg_dropcluster --stop "$ver" main
done
echo "ncreel: system packages installed"
