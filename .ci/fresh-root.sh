#!/usr/bin/env bash
# What a new user has: a minimal Debian 12 root (debootstrap minbase) with only git, make and
# python3, this repository cloned in. Runs the README's commands there, as root:
#
#   .ci/fresh-root.sh              make demo, then checks its outputs (about 4 min)
#   .ci/fresh-root.sh test [ARGS]  make demo, then make test PYTEST_ARGS="ARGS"
#                                  (default: the suite without the scheduler tests)
#
# Needs root, debootstrap (installed when missing) and Debian's and PyPI's package servers.
# FRESH_ROOT names the directory (default: a new one under /var/tmp, removed at the end).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-demo}
pytest_args=${2:-"-m 'not slurm and not pbs'"}
[ "$(id -u)" -eq 0 ] || { echo "fresh-root: error: run as root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || {
    echo "fresh-root: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
}
root=${FRESH_ROOT:-$(mktemp -d /var/tmp/ncreel-fresh-root.XXXXXX)}
keep=${FRESH_ROOT:+1}
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
mirror=${mirror:-http://deb.debian.org/debian}

cleanup() {
    for m in dev/pts dev proc sys; do umount -l "$root/$m" 2>/dev/null || true; done
    [ -n "$keep" ] || rm -rf "$root"
}
trap cleanup EXIT

t0=$(date +%s)
if [ ! -x "$root/usr/bin/apt-get" ]; then
    echo "fresh-root: debootstrap --variant=minbase bookworm $root (about 1 min)"
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 \
        || { tail -20 "$root.debootstrap.log"; exit 1; }
    rm -f "$root.debootstrap.log"
fi
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# This machine's CA bundle, for a package proxy that re-signs TLS (as the host's pip does).
cp /etc/ssl/certs/ca-certificates.crt "$root/root/host-ca.crt"

inroot() {
    chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        PIP_CERT=/root/host-ca.crt PIP_DISABLE_PIP_VERSION_CHECK=1 "$@"
}

echo "fresh-root: apt-get install git make python3 (what the README assumes)"
inroot apt-get update -q >/dev/null
inroot apt-get install -y -q --no-install-recommends git make python3 ca-certificates >/dev/null
rm -rf "$root/root/ncreel"
git clone -q --no-local "$repo" "$root/root/ncreel"
git -C "$root/root/ncreel" checkout -q "$(git -C "$repo" rev-parse HEAD)"
echo "fresh-root: ready after $(( $(date +%s) - t0 )) s; make demo"

t1=$(date +%s)
inroot bash -c 'cd /root/ncreel && make demo'
out="$root/root/ncreel/results/demo"
frames=$(ffprobe -v error -count_frames -select_streams v:0 \
    -show_entries stream=nb_read_frames -of csv=p=0 "$out/movie.mp4" 2>/dev/null || true)
rows=$(wc -l <"$out/cells.copy")
echo "fresh-root: make demo took $(( $(date +%s) - t1 )) s: rows=$rows frames=${frames:-?}"
[ "$rows" -eq 435120 ] || { echo "fresh-root: error: expected 435120 rows" >&2; exit 1; }
[ -s "$out/movie.mp4" ] && [ -s "$out/cells.sql" ] && [ -s "$out/preview.png" ]

if [ "$what" = test ]; then
    t2=$(date +%s)
    inroot bash -c "cd /root/ncreel && make test PYTEST_ARGS=\"$pytest_args\""
    echo "fresh-root: make test took $(( $(date +%s) - t2 )) s"
fi
echo "fresh-root: passed in $(( $(date +%s) - t0 )) s"
