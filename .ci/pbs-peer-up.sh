#!/usr/bin/env bash
# A SECOND PBS Pro server on this host, for ncreel's peer-server tests, as root.
#
# NCAR's Casper and Derecho are separate PBS servers: jobs go to `queue@server`, carry the
# server in their id (`123.casper-pbs`), and qstat/qdel reach across servers. This starts
# such a peer, `pbs2`, from the OpenPBS that .ci/pbs-up.sh installed (run that first):
#   - its own name and address: `pbs2` = 127.0.0.2 (added to /etc/hosts), so that a
#     client reaches it at PBS's usual port 15001 while the main server keeps 127.0.0.1;
#   - its own configuration (/etc/pbs2.conf, read by its daemons and by qmgr through
#     PBS_CONF_FILE; clients reach it with the main /etc/pbs.conf), PBS_HOME
#     (/var/spool/pbs2; PBS refuses one under /tmp) and PostgreSQL data service (port
#     16007: 15007's Unix socket belongs to the main one);
#   - no scheduler, comm or MoM: jobs there stay queued, which is all the tests need
#     (submit to `share@pbs2`, status of `N.pbs2`, qdel from the main server's clients);
#   - a `share` queue, job history (qstat -x), root may submit, flatuid.
# Idempotent: seconds when already up. PBS_PEER_NAME / PBS_PEER_ADDR change name/address.
set -euo pipefail

NAME=${PBS_PEER_NAME:-pbs2}
ADDR=${PBS_PEER_ADDR:-127.0.0.2}
CONF=/etc/$NAME.conf
PHOME=/var/spool/$NAME
die() { echo "ncreel .ci/pbs-peer-up.sh: error: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (sudo bash .ci/pbs-peer-up.sh)"
[ -x /opt/pbs/sbin/pbs_server ] || die "OpenPBS is not installed: run .ci/pbs-up.sh first"

getent hosts "$NAME" | grep -q "^$ADDR " || echo "$ADDR $NAME" >>/etc/hosts

# pbs_db_utility creates a data service only when PBS_DATA_SERVICE_HOST is unset, while
# the server needs it set (else it looks for its database at localhost, the main one's):
# the data service is created with a configuration without it, then the full one is used.
conf() {
	printf '%s\n' "PBS_SERVER=$NAME" PBS_START_SERVER=1 PBS_START_SCHED=0 PBS_START_COMM=0 \
		PBS_START_MOM=0 PBS_EXEC=/opt/pbs "PBS_HOME=$PHOME" PBS_CORE_LIMIT=unlimited \
		"PBS_LISTEN_ADDR=$ADDR" PBS_DATA_SERVICE_PORT=16007 "PBS_LEAF_ROUTERS=$(hostname)"
}
conf >"$CONF.init"
{ conf; printf '%s\n' "PBS_SERVER_HOST_NAME=$NAME" "PBS_DATA_SERVICE_HOST=$NAME"; } >"$CONF"

up() { PBS_CONF_FILE=$CONF timeout 20 /opt/pbs/bin/qstat -B >/dev/null 2>&1; }
if ! up; then
	LOG=/tmp/$NAME-install.log
	if [ ! -d "$PHOME/datastore" ]; then
		PBS_CONF_FILE=$CONF.init /opt/pbs/libexec/pbs_postinstall server 23.06.06 /opt/pbs \
			"$PHOME" '' sameconf >"$LOG" 2>&1 || die "pbs_postinstall failed: see $LOG"
		# install_db starts PostgreSQL, waits until pg_ctl status says it runs, then calls
		# createdb at once: on a busy machine the socket is not there yet ("No such file"),
		# seen on a clean CI machine. It cleans up after a failure, so it is tried again.
		install_db() (
			export PBS_CONF_FILE=$CONF.init PBS_HOME=$PHOME PBS_EXEC=/opt/pbs PBS_SERVER=$NAME \
				PBS_DATA_SERVICE_PORT=16007 PBS_DATA_SERVICE_USER=postgres
			set +u  # pbs_db_env reads unset variables
			# shellcheck disable=SC1091
			. /opt/pbs/libexec/pbs_db_env
			/opt/pbs/libexec/pbs_db_utility install_db
		)
		ok=
		for try in 1 2 3; do
			if install_db >>"$LOG" 2>&1; then ok=1; break; fi
			echo "ncreel .ci/pbs-peer-up.sh: install_db attempt $try failed; again" >&2
			sleep 3
		done
		[ -n "$ok" ] || die "pbs_db_utility install_db failed: see $LOG"
		PBS_CONF_FILE=$CONF /opt/pbs/sbin/pbs_server -t create >>"$LOG" 2>&1
	else
		PBS_CONF_FILE=$CONF /opt/pbs/sbin/pbs_server >>"$LOG" 2>&1
	fi
	for _ in $(seq 60); do up && break; sleep 1; done
	up || die "the $NAME server did not start: see $PHOME/server_logs/ and $LOG"
fi
export PBS_CONF_FILE=$CONF

QMGR=/opt/pbs/bin/qmgr
/opt/pbs/bin/qstat -Q share >/dev/null 2>&1 || "$QMGR" -c "create queue share queue_type = execution"
"$QMGR" -c "set queue share enabled = True"
"$QMGR" -c "set queue share started = True"
"$QMGR" -c "set server acl_roots = root"
"$QMGR" -c "set server flatuid = True"
"$QMGR" -c "set server job_history_enable = True"
echo "ncreel .ci/pbs-peer-up.sh: PBS server $NAME ($ADDR) up with queues:" \
	"$(/opt/pbs/bin/qstat -Q | awk 'NR > 2 {print $1}' | tr '\n' ' ')"
