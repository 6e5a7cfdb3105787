#!/usr/bin/env bash
# What a new user has: a minimal Debian 12 root (debootstrap minbase) with only git, make and
# python3 -- no python3-venv, no ffmpeg, graphviz or PostgreSQL -- and an ordinary user
# (no root, no sudo, as on a cluster login node) who clones this repository and runs the
# README's commands:
#
#   1. make demo, then checks its outputs (rows, frames, files) and that its virtualenv
#      holds exactly envs/lock/workflow.txt; make dag (no graphviz: .dot)
#   2. the no-root test command, make test PYTEST_ARGS="-m 'not slurm and not pbs'": tests
#      needing a missing system program or root skip with their reason; 0 failures
#   3. root installs the test programs (.ci/sysdeps.sh test), then the same user runs ONE
#      representative of the tests step 2 skipped for each distinct missing-program reason
#      (ffprobe, ffmpeg, initdb, dot, chromium, the psql/pg_ctl/zstd one) and one PostGIS test
#      (its reason names initdb too), the quickest by tests/durations.json. Rule: what
#      differs for this user is how each program starts as a non-root user (initdb/pg_ctl
#      without runuser, chromium's sandbox, ffmpeg/dot/psql writing in the user's tmp); what
#      the tests check with the programs installed is the same for any user and the root run
#      (`make test`, before this script in .ci/run) has already run all of them.
#   4. nothing left in /tmp by the tests
#
#   .ci/fresh-root.sh [PYTEST_ARGS]    (default: "-m 'not slurm and not pbs'")
#
# Needs root (debootstrap, chroot), debootstrap (installed when missing) and Debian's and
# PyPI's package servers. FRESH_ROOT names the directory (default: a new one under /var/tmp,
# removed at the end). Prints the time of each step.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
pytest_args=${1:-"-m 'not slurm and not pbs'"}
[ "$(id -u)" -eq 0 ] || { echo "fresh-root: error: run as root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || {
    echo "fresh-root: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
}
root=${FRESH_ROOT:-$(mktemp -d /var/tmp/ncreel-fresh-root.XXXXXX)}
keep=${FRESH_ROOT:+1}
chmod 755 "$root"  # mktemp -d makes it 0700: the root's / must be open to its ordinary user
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
# No daemon starts inside the root (Debian's PostgreSQL package would start a cluster).
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
# This machine's CA bundle, for a package proxy that re-signs TLS (as the host's pip does).
cp /etc/ssl/certs/ca-certificates.crt "$root/root/host-ca.crt"

inroot() {
    chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        PIP_CERT=/root/host-ca.crt PIP_DISABLE_PIP_VERSION_CHECK=1 "$@"
}
# The ordinary user: a login shell's environment, this machine's CA bundle for the package
# proxy (urllib reads SSL_CERT_FILE, pip PIP_CERT), no sudo.
USER_NAME=ada
asuser() {
    chroot --userspec=$USER_NAME:$USER_NAME "$root" /usr/bin/env -i HOME=/home/$USER_NAME \
        USER=$USER_NAME LOGNAME=$USER_NAME LANG=C.UTF-8 TERM=dumb \
        PATH=/usr/local/bin:/usr/bin:/bin SSL_CERT_FILE=/etc/ssl/host-ca.crt \
        PIP_CERT=/etc/ssl/host-ca.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
        bash -c "cd /home/$USER_NAME/ncreel && $1"
}
step() { echo "fresh-root: $1 took $(( $(date +%s) - $2 )) s"; }

echo "fresh-root: apt-get install git make python3 (what the README assumes)"
inroot apt-get update -q >/dev/null
inroot apt-get install -y -q --no-install-recommends git make python3 ca-certificates >/dev/null
if inroot python3 -c 'import ensurepip' 2>/dev/null; then
    echo "fresh-root: error: python3 has ensurepip (python3-venv): not the case to test" >&2
    exit 1
fi
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/host-ca.crt"
inroot userdel -r $USER_NAME 2>/dev/null || true
inroot useradd -m -s /bin/bash $USER_NAME
rm -rf "$root/home/$USER_NAME/ncreel"
git clone -q --no-local "$repo" "$root/home/$USER_NAME/ncreel"
git -C "$root/home/$USER_NAME/ncreel" checkout -q "$(git -C "$repo" rev-parse HEAD)"
inroot chown -R $USER_NAME:$USER_NAME /home/$USER_NAME/ncreel
echo "fresh-root: ready after $(( $(date +%s) - t0 )) s; as $USER_NAME (uid $(inroot id -u $USER_NAME)): make demo"

t1=$(date +%s)
asuser 'make demo'
out="$root/home/$USER_NAME/ncreel/results/demo"
frames=$(ffprobe -v error -count_frames -select_streams v:0 \
    -show_entries stream=nb_read_frames -of csv=p=0 "$out/movie.mp4" 2>/dev/null || true)
rows=$(wc -l <"$out/cells.copy")
step "make demo (rows=$rows frames=${frames:-?}, .venv $(du -sm "$out/../../.venv" | cut -f1) MB)" "$t1"
[ "$rows" -eq 435120 ] || { echo "fresh-root: error: expected 435120 rows" >&2; exit 1; }
if [ -n "$frames" ]; then
    [ "$frames" -eq 240 ] || { echo "fresh-root: error: expected 240 frames" >&2; exit 1; }
fi
[ -s "$out/movie.mp4" ] && [ -s "$out/cells.sql" ] && [ -s "$out/preview.png" ]
if asuser '.venv/bin/python -c "import pytest"' 2>/dev/null; then
    echo "fresh-root: error: make demo installed the test tools" >&2; exit 1
fi
# Exactly the locked versions, nothing more (pip's list against envs/lock/workflow.txt).
asuser '.venv/bin/python .ci/lock.py check envs/lock/workflow.txt' 

t1=$(date +%s)
asuser 'make dag'
[ -s "$out/rulegraph.dot" ] && [ -s "$out/dag.dot" ] && [ ! -e "$out/dag.svg" ]
step "make dag without graphviz (.dot only)" "$t1"

user_tests() {  # what, pytest arguments
    t1=$(date +%s)
    asuser "make test PYTEST_ARGS=\"$2\"" | tee "$root/tmp/fresh-root-test.log"
    step "make test as $USER_NAME ($1): $(tail -1 "$root/tmp/fresh-root-test.log")" "$t1"
    left=$(du -sm "$root/tmp" | cut -f1)
    [ "$left" -lt 20 ] || { du -sh "$root"/tmp/* >&2; echo "fresh-root: error: tests left" \
        "${left} MB in /tmp" >&2; exit 1; }
}
home=/home/$USER_NAME
# Step 3's packages are fetched (not installed) while step 2 runs: it waits on the network.
inroot bash -c "cd $home/ncreel && SYSDEPS_DOWNLOAD_ONLY=1 bash .ci/sysdeps.sh test" \
    >"$root.download.log" 2>&1 &
download=$!
user_tests "no ffmpeg, graphviz, PostgreSQL" "$pytest_args --junitxml=$home/first.xml"
wait "$download" || { cat "$root.download.log"; echo "fresh-root: error:" \
    "fetching the test programs' packages failed" >&2; exit 1; }
rm -f "$root.download.log"

t1=$(date +%s)
inroot bash -c "cd $home/ncreel && bash .ci/sysdeps.sh test" >/dev/null
step "sysdeps.sh test as root" "$t1"
# One representative per reason step 2 skipped tests for a missing program (see the header):
# the root run has run them all with the programs installed.
python3 - "$root$home/first.xml" "$root$home/second.args" <<'EOF_PY'
import json, os, re, sys, xml.etree.ElementTree as ET
repo = os.path.join(os.path.dirname(sys.argv[2]), "ncreel")  # the user's clone
groups = {}  # (skip reason, PostGIS test) -> the test ids with it, in run order
for case in ET.parse(sys.argv[1]).iter("testcase"):
    skipped = case.find("skipped")
    if skipped is None or "not installed" not in skipped.get("message", ""):
        continue
    parts = case.get("classname").split(".")
    # classname is the module's dotted path, then a class if the test is in one
    for n in (len(parts), len(parts) - 1):
        path = "/".join(parts[:n]) + ".py"
        if os.path.isfile(os.path.join(repo, path)):
            # without the "@group" pytest-xdist's --dist loadgroup appends to a test's name
            name = re.sub(r"@[^\]]*$", "", case.get("name"))
            test_id = "::".join([path, *parts[n:], name])
            key = (skipped.get("message"), "postgis" in test_id.lower())
            groups.setdefault(key, []).append(test_id)
            break
# the quickest by tests/durations.json (one not in it: tests/test_*.py before the workflow
# runs of tests/integration; tests/reliability needs root). A module-scoped fixture's time
# is counted on whichever of its tests ran first, so a test in a module that has one may
# pay for it alone: it counts the module's slowest test too.
with open(os.path.join(repo, "tests", "durations.json")) as fh:
    seconds = json.load(fh)


def cost(test_id):
    own = seconds.get(test_id, 20.0 if test_id.count("/") > 1 else 0.5)
    path = test_id.split("::")[0]
    with open(os.path.join(repo, path)) as fh:
        if not re.search(r"scope=[\"']module", fh.read()):
            return own
    return own + max((s for t, s in seconds.items() if t.startswith(path + "::")), default=0.0)


ids = [min(tests, key=cost) for tests in groups.values()]
open(sys.argv[2], "w").write("".join(i + "\n" for i in ids))
print(f"fresh-root: {sum(map(len, groups.values()))} tests skipped for a missing program; "
      f"{len(ids)} representatives (one per reason) run again:", *ids, sep="\n  ")
EOF_PY
if [ -s "$root$home/second.args" ]; then
    chmod 644 "$root$home/second.args"
    user_tests "system programs installed: one test per reason" "-m 'not slurm and not pbs' @$home/second.args"
fi
echo "fresh-root: passed in $(( $(date +%s) - t0 )) s"
