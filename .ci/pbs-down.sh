#!/usr/bin/env bash
# Stop what .ci/pbs-up.sh started, as root: the peer server (pbs2, see pbs-peer-up.sh), then
# the main OpenPBS with the shared package's pbs-down.sh (its init script). Configuration,
# PBS_HOME and job history are kept, so pbs-up.sh brings the same servers back. Safe to run
# when nothing is running.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NAME=${PBS_PEER_NAME:-pbs2}
CONF=/etc/$NAME.conf
die() { echo "ncreel .ci/pbs-down.sh: error: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (sudo bash .ci/pbs-down.sh)"

peer_up() { PBS_CONF_FILE=$CONF timeout 5 /opt/pbs/bin/qstat -B >/dev/null 2>&1; }
peer_db() { pgrep -f -- "-D /var/spool/$NAME/datastore" >/dev/null; }
if [ -f "$CONF" ] && [ -x /opt/pbs/bin/qterm ]; then
	PBS_CONF_FILE=$CONF timeout 30 /opt/pbs/bin/qterm -t quick "$NAME" 2>/dev/null || true
	for _ in $(seq 30); do peer_up || peer_db || break; sleep 1; done
	if peer_db; then
		PBS_CONF_FILE=$CONF /opt/pbs/sbin/pbs_dataservice stop || true
	fi
	echo "ncreel .ci/pbs-down.sh: $NAME stopped"
fi

SHARED=${OPENPBS_DIR:-}
if [ -z "$SHARED" ]; then
	for d in "$(dirname "$REPO")/shared/openpbs" "$(dirname "$(dirname "$REPO")")/shared/openpbs"; do
		[ -x "$d/pbs-down.sh" ] && { SHARED=$d; break; }
	done
fi
[ -n "$SHARED" ] && [ -x "$SHARED/pbs-down.sh" ] ||
	die "the OpenPBS package is missing: expected $(dirname "$REPO")/shared/openpbs/pbs-down.sh"
bash "$SHARED/pbs-down.sh"
