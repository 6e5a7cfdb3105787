#!/usr/bin/env bash
# Bring up a real single-node PBS Pro (OpenPBS 23.06.06) for ncreel's tests, as root.
#
# The server itself comes from the shared OpenPBS package that CI places beside the clone
# (<parent of the repository>/shared/openpbs: prebuilt /opt/pbs tarball + its pbs-up.sh,
# see its README.md); OPENPBS_DIR overrides where it is looked for. On top of that, this
# script adds what ncreel's PBS profiles and tests need (additive and idempotent: existing
# queues and jobs are never touched):
#   - a `share` queue, the queue profiles/cheyenne submits to (Cheyenne's shared queue),
#     with a per-job memory limit (resources_max.mem 100gb, below the 128 GB of Cheyenne's
#     shared node), so that qsub rejects a larger request as a site's queue does;
#   - scheduler_iteration 10 s, so a job freed by another's end starts within seconds
#     (PBS also schedules at every submit and job end; the shared default is 30 s).
# PBS commands are in /opt/pbs/bin; Slurm's Torque wrappers own /usr/bin/qsub, so this
# script and the tests call /opt/pbs/bin/... by path.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "ncreel .ci/pbs-up.sh: error: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (sudo bash .ci/pbs-up.sh)"

if [ -n "${OPENPBS_DIR:-}" ]; then
	SHARED=$OPENPBS_DIR
else
	SHARED=""
	# beside the clone (CI), or beside the directory holding git worktrees
	for d in "$(dirname "$REPO")/shared/openpbs" "$(dirname "$(dirname "$REPO")")/shared/openpbs"; do
		[ -x "$d/pbs-up.sh" ] && { SHARED=$d; break; }
	done
fi
[ -n "$SHARED" ] && [ -x "$SHARED/pbs-up.sh" ] ||
	die "the OpenPBS package is missing: expected $(dirname "$REPO")/shared/openpbs/pbs-up.sh" \
		"(copy shared/ beside the clone, or set OPENPBS_DIR=<dir holding pbs-up.sh>)"

bash "$SHARED/pbs-up.sh"

QMGR=/opt/pbs/bin/qmgr
QSTAT=/opt/pbs/bin/qstat
for q in share; do
	"$QSTAT" -Q "$q" >/dev/null 2>&1 || "$QMGR" -c "create queue $q queue_type = execution"
	"$QMGR" -c "set queue $q enabled = True"
	"$QMGR" -c "set queue $q started = True"
done
"$QMGR" -c "set queue share resources_max.mem = 100gb"
"$QMGR" -c "set server scheduler_iteration = 10"
# The vnode advertises this machine's own cores and memory, whatever a test left: a run
# interrupted while a test had it advertise a Derecho node's 128 cores left it so, and the
# tests that need jobs to queue on a small node then fail on every later run.
node=$(/opt/pbs/bin/pbsnodes -a | awk 'NF && $0 !~ /^ / {print $1; exit}')
"$QMGR" -c "set node $node resources_available.ncpus = $(nproc)"
"$QMGR" -c "set node $node resources_available.mem = $(awk '/^MemTotal:/ {print $2}' /proc/meminfo)kb"
# Every PBS job starts in a login shell, which reads root's ~/.bashrc; on the CI machines that
# runs `pyenv init -`, whose `pyenv rehash` takes a lock file in pyenv's shims folder and
# waits up to 60 s for it. A shell killed holding it leaves the file, and then every later
# job waited 60 s before its first command (a whole CI run went past its time limit so).
# Here jobs give up on that lock at once (PYENV_REHASH_TIMEOUT, in the environment PBS
# gives every job), and a lock file no rehash holds is removed.
pyenv_root=$(getent passwd root | cut -d: -f6)/.pyenv
if [ -d "$pyenv_root" ]; then
	pgrep -f libexec/pyenv-rehash >/dev/null || rm -f "$pyenv_root/shims/.pyenv-shim"
	env_file=$(sed -n 's/^PBS_HOME=//p' /etc/pbs.conf)/pbs_environment
	if ! grep -q '^PYENV_REHASH_TIMEOUT=' "$env_file"; then
		echo "PYENV_REHASH_TIMEOUT=0" >>"$env_file"
		# MoM reads the file when it starts
		/etc/init.d/pbs restart >/dev/null 2>&1
		for _ in $(seq 60); do
			/opt/pbs/bin/pbsnodes -v "$node" 2>/dev/null | grep -q "state = free" && break
			sleep 1
		done
	fi
fi
echo "ncreel .ci/pbs-up.sh: PBS up with queues: $("$QSTAT" -Q | awk 'NR > 2 {print $1}' | tr '\n' ' ')"

# A second PBS server, `pbs2`, for the peer-server tests (queue@server, N.pbs2, qdel across).
bash "$REPO/.ci/pbs-peer-up.sh"
