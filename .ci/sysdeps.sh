#!/usr/bin/env bash
# Install the system tools ncreel's tests use, only where missing: ffmpeg/ffprobe, graphviz,
# and a PostgreSQL server (initdb/pg_ctl). Needs root (or sudo) on Debian/Ubuntu.
set -euo pipefail
need=()
command -v ffprobe >/dev/null || need+=(ffmpeg)
command -v dot >/dev/null || need+=(graphviz)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v psql >/dev/null || need+=(postgresql-client)
[ ${#need[@]} -eq 0 ] && exit 0
echo "installing system packages: ${need[*]}"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
