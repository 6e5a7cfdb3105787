#!/usr/bin/env bash
# System programs ncreel's tests and `make dag` use, installed with apt-get where missing (as
# root, or with sudo that needs no password), or else named, one line each, with what still
# works: the workflow itself needs none of them (the movie falls back to imageio-ffmpeg's
# ffmpeg), and a test that needs a missing one is skipped with that reason.
#
#   sysdeps.sh test   ffmpeg/ffprobe, graphviz, PostgreSQL server and psql, PostGIS, zstd,
#                     chromium, cdo (make test)
#   sysdeps.sh dag    graphviz only                                    (make dag)
#
# SYSDEPS_DOWNLOAD_ONLY=1 only fetches the packages into apt's cache (nothing installed, so
# the tests still find them missing): CI's fresh root fetches them while its no-root tests
# run, and installs them after.
#
# The Python and the virtualenv need no root: see .ci/venv.sh.
set -euo pipefail
mode=${1:-test}
pkgs=()

missing() {  # Debian package, what it gives
    pkgs+=("$1")
    echo "ncreel: missing $2 -> Debian package $1"
}

if [ "$mode" = dag ]; then
    command -v dot >/dev/null || missing graphviz "graphviz dot (rule graph pictures)"
fi
if [ "$mode" = test ]; then
    command -v ffprobe >/dev/null || missing ffmpeg "ffmpeg/ffprobe (movie tests)"
    command -v dot >/dev/null || missing graphviz "graphviz dot (rule graph tests)"
    { ls /usr/lib/postgresql/*/bin/initdb || command -v initdb; } >/dev/null 2>&1 \
        || missing postgresql "a PostgreSQL server (tests start a throw-away one)"
    command -v psql >/dev/null || missing postgresql-client "psql (cells.sql tests)"
    # PostGIS for the installed server's major version; with no server yet, Debian's
    # postgresql-postgis follows the default server the line above installs.
    pg_ver=$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 | cut -d/ -f5 || true)
    if [ -z "$pg_ver" ]; then
        missing postgresql-postgis "PostGIS (cells.geometry: postgis tests)"
    elif [ ! -e "/usr/share/postgresql/$pg_ver/extension/postgis.control" ]; then
        missing "postgresql-$pg_ver-postgis-3" "PostGIS for PostgreSQL $pg_ver (cells.geometry: postgis tests)"
    fi
    command -v zstd >/dev/null || missing zstd "zstd (cells.sql of zstd-compressed shards)"
    command -v chromium >/dev/null || missing chromium "headless Chromium (the report's movie plays)"
    command -v cdo >/dev/null || missing cdo "CDO (inputs with an absolute time axis, as cdo -a writes them)"
fi
[ ${#pkgs[@]} -eq 0 ] && exit 0

# Without root nothing is installed and nothing stops: say what is skipped and how to get it.
cannot() {
    if [ "$mode" = test ]; then
        echo "ncreel: the tests that need these are skipped (pytest -ra lists each with its" \
            "reason); everything else runs."
    fi
    echo "ncreel: without root: 'module avail ${pkgs[*]/postgresql-client/}' on a cluster, or" \
        "'conda install -c conda-forge ${pkgs[*]/postgresql-client/}' in a conda env, puts" \
        "them on PATH. With root: $1"
    exit 0
}
if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)  # never a password prompt: a login node's sudo is not for users
else
    SUDO=(none)
fi
if ! command -v apt-get >/dev/null; then
    cannot "install the equivalent of: ${pkgs[*]}"
fi
if [ "${SUDO[*]}" = none ]; then
    cannot "apt-get update && apt-get install -y ${pkgs[*]}"
fi
clusters_before=$(ls -d /etc/postgresql/*/main 2>/dev/null || true)
export DEBIAN_FRONTEND=noninteractive
echo "ncreel: ${SUDO[*]:+${SUDO[*]} }apt-get update"
"${SUDO[@]}" apt-get update -q
if [ -n "${SYSDEPS_DOWNLOAD_ONLY:-}" ]; then
    echo "ncreel: ${SUDO[*]:+${SUDO[*]} }apt-get install --download-only ${pkgs[*]}"
    "${SUDO[@]}" apt-get install -y -q --download-only --no-install-recommends "${pkgs[@]}"
    exit 0
fi
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
