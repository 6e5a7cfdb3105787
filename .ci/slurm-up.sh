#!/usr/bin/env bash
# Bring up a real single-node Slurm 22.05 (Debian 12 packages) for tests:
#   munged, mariadbd, slurmdbd, slurmctld, slurmd, started directly as daemons (no systemd).
# Accounting (sacct/sacctmgr) is real: slurmdbd + MariaDB. Cluster "ncreel", account "ncreel"
# with root in it, one partition "debug" (Default=YES, MaxTime=INFINITE).
#
# Idempotent: safe to run again while everything runs (nothing is restarted unless a config
# file it writes has changed). Run as root:   bash .ci/slurm-up.sh
# Stop with:                                   bash .ci/slurm-down.sh
#
# Environment overrides:
#   SLURM_UP_TIMEOUT       seconds to wait for each daemon / the node (default 120)
#   SLURM_DEF_MEM_PER_CPU  DefMemPerCPU in MB (default min(1024, RealMemory/CPUs))
set -euo pipefail

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}
export DEBIAN_FRONTEND=noninteractive

CLUSTER=ncreel
ACCOUNT=ncreel
PARTITION=debug
TIMEOUT=${SLURM_UP_TIMEOUT:-120}
NODE=$(hostname -s)

SLURM_CONF=/etc/slurm/slurm.conf
SLURMDBD_CONF=/etc/slurm/slurmdbd.conf
LOGDIR=/var/log/slurm
CTLD_SPOOL=/var/spool/slurmctld
SLURMD_SPOOL=/var/spool/slurmd
CTLD_PID=/run/slurmctld.pid
SLURMD_PID=/run/slurmd.pid
DBD_PID=/run/slurmdbd.pid
MUNGE_PID=/run/munge/munged.pid
MYSQL_PID=/run/mysqld/mysqld.pid
MYSQL_LOG=/var/log/mysql/error.log
MUNGE_LOG=/var/log/munge/munged.log

START=$SECONDS
log() { printf '[slurm-up %3ds] %s\n' "$((SECONDS - START))" "$*"; }

die() {
    # die MESSAGE [LOGFILE...]: print the error and the tail of the relevant logs, exit 1
    local msg=$1; shift
    echo "slurm-up: ERROR: $msg" >&2
    local f
    for f in "$@"; do
        if [[ -f $f ]]; then
            echo "----- last 30 lines of $f -----" >&2
            tail -n 30 "$f" >&2 || true
        else
            echo "----- $f does not exist -----" >&2
        fi
    done
    exit 1
}

# wait_for DESCRIPTION COMMAND... : retry COMMAND every second until it succeeds or TIMEOUT.
wait_for() {
    local what=$1; shift
    local deadline=$((SECONDS + TIMEOUT))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            return 1
        fi
        sleep 1
    done
    log "$what: ok"
}

# is_running NAME PIDFILE: true if a process called NAME runs (pid file first, then exact name).
is_running() {
    local name=$1 pidfile=$2 pid
    if [[ -s $pidfile ]]; then
        pid=$(<"$pidfile")
        if [[ $pid =~ ^[0-9]+$ ]] && [[ -r /proc/$pid/comm ]] && [[ $(</proc/"$pid"/comm) == "$name" ]]; then
            return 0
        fi
    fi
    pgrep -x "$name" >/dev/null 2>&1
}

# shellcheck source=.ci/slurm-common.sh
source "$(dirname "$0")/slurm-common.sh"

# stop_daemon NAME PIDFILE: SIGTERM the daemon, wait up to 30 s, then SIGKILL.
stop_daemon() {
    local name=$1 pidfile=$2 pid i
    pid=$(daemon_pid "$name" "$pidfile" || true)
    [[ -n $pid ]] || return 0
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 30; i++)); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$pidfile"; return 0; }
        sleep 1
    done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$pidfile"
}

# put_file DEST MODE OWNER < content: write DEST only if the content differs; return 0 if changed.
put_file() {
    local dest=$1 mode=$2 owner=$3 tmp
    tmp=$(mktemp)
    cat >"$tmp"
    if [[ -f $dest ]] && cmp -s "$tmp" "$dest"; then
        rm -f "$tmp"
        chmod "$mode" "$dest"; chown "$owner" "$dest"
        return 1
    fi
    install -m "$mode" -o "${owner%%:*}" -g "${owner##*:}" "$tmp" "$dest"
    rm -f "$tmp"
    log "wrote $dest"
    return 0
}

[[ $(id -u) -eq 0 ]] || die "must run as root (CI runs: sudo bash .ci/slurm-up.sh)"

# ---------------------------------------------------------------- packages
need_install=0
for b in munged munge unmunge mariadbd mariadb mariadb-admin slurmdbd slurmctld slurmd \
         sinfo sbatch squeue scontrol sacct sacctmgr qsub qstat qdel; do
    command -v "$b" >/dev/null 2>&1 || { need_install=1; break; }
done
if ((need_install)); then
    log "installing packages (apt-get)"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends \
        munge slurmctld slurmd slurm-client slurm-wlm-torque slurmdbd mariadb-server \
        >/tmp/slurm-up-apt.log 2>&1 || die "apt-get install failed" /tmp/slurm-up-apt.log
    log "packages installed"
else
    log "packages already installed"
fi
id slurm >/dev/null 2>&1 || die "user 'slurm' does not exist (should come with the slurm packages)"
id munge >/dev/null 2>&1 || die "user 'munge' does not exist (should come with the munge package)"
id mysql >/dev/null 2>&1 || die "user 'mysql' does not exist (should come with mariadb-server)"

# ---------------------------------------------------------------- munge
install -d -m 0755 -o munge -g munge /run/munge
install -d -m 0700 -o munge -g munge /var/log/munge /var/lib/munge /etc/munge
[[ ! -e $MUNGE_LOG ]] || chown munge:munge "$MUNGE_LOG"
if [[ ! -s /etc/munge/munge.key ]]; then
    log "creating /etc/munge/munge.key"
    mungekey --create --keyfile=/etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key

munge_ok() { munge -n </dev/null | unmunge >/dev/null 2>&1; }
if is_running munged "$MUNGE_PID" && munge_ok; then
    log "munged already running"
else
    log "starting munged"
    # munged writes $MUNGE_LOG itself; its startup errors go to stderr.
    runuser -u munge -- munged --force </dev/null >/tmp/slurm-up-munged.err 2>&1 \
        || die "munged failed to start" /tmp/slurm-up-munged.err "$MUNGE_LOG"
    wait_for "munge credential round-trip" munge_ok || die "munge does not work" "$MUNGE_LOG"
fi

# ---------------------------------------------------------------- MariaDB
install -d -m 0755 -o mysql -g mysql /run/mysqld
install -d -m 2750 -o mysql -g adm /var/log/mysql
if [[ ! -d /var/lib/mysql/mysql ]]; then
    log "initialising MariaDB data directory"
    install -d -m 0755 -o mysql -g mysql /var/lib/mysql
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/tmp/slurm-up-mariadb-install.log 2>&1 \
        || die "mariadb-install-db failed" /tmp/slurm-up-mariadb-install.log
fi
mysql_ok() { mariadb-admin --protocol=socket ping; }
if mysql_ok >/dev/null 2>&1; then
    log "mariadbd already running"
else
    log "starting mariadbd"
    # mariadbd does not daemonize itself: detach it from this shell completely.
    setsid mariadbd --user=mysql --pid-file="$MYSQL_PID" --log-error="$MYSQL_LOG" \
        --innodb-buffer-pool-size=1G --innodb-lock-wait-timeout=900 \
        </dev/null >/dev/null 2>&1 &
    wait_for "mariadbd ping" mysql_ok || die "mariadbd did not come up" "$MYSQL_LOG"
fi
# slurmdbd runs as OS user slurm and logs in through the unix socket (no password to manage).
mariadb --protocol=socket <<'SQL' || die "could not create the slurm database/user" "$MYSQL_LOG"
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED VIA unix_socket;
GRANT ALL PRIVILEGES ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL

# ---------------------------------------------------------------- Slurm configuration
install -d -m 0755 -o root -g root /etc/slurm
install -d -m 0755 -o slurm -g slurm "$LOGDIR" "$CTLD_SPOOL"
install -d -m 0755 -o root -g root "$SLURMD_SPOOL"

# Hardware line from slurmd itself; RealMemory a bit (5 %) below what the machine reports,
# so the node is never drained for "Low RealMemory".
hw=$(slurmd -C 2>/dev/null | grep -m1 '^NodeName=') || die "slurmd -C failed"
cpus=$(sed -n 's/.*\bCPUs=\([0-9]\+\).*/\1/p' <<<"$hw")
mem=$(sed -n 's/.*\bRealMemory=\([0-9]\+\).*/\1/p' <<<"$hw")
[[ -n $cpus && -n $mem ]] || die "cannot parse 'slurmd -C' output: $hw"
realmem=$((mem - mem / 20))
defmem=${SLURM_DEF_MEM_PER_CPU:-$((realmem / cpus < 1024 ? realmem / cpus : 1024))}
nodeline=$(sed -e "s/\bRealMemory=[0-9]\+/RealMemory=$realmem/" -e "s/^NodeName=[^ ]*/NodeName=$NODE/" <<<"$hw")

slurm_conf_changed=0
put_file "$SLURM_CONF" 0644 root:root <<EOF && slurm_conf_changed=1 || true
# Written by .ci/slurm-up.sh -- single-node Slurm for tests. Edits are overwritten.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
SlurmUser=slurm
SlurmdUser=root
StateSaveLocation=$CTLD_SPOOL
SlurmdSpoolDir=$SLURMD_SPOOL
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MpiDefault=none
MailProg=/bin/true
SwitchType=switch/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$defmem
ReturnToService=2
# Finished jobs stay visible to squeue/scontrol/qstat for MinJobAge seconds.
MinJobAge=300
InactiveLimit=0
KillWait=10
Waittime=0
# Memory is enforced without cgroups: the job is killed when its RSS exceeds --mem.
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=2
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobCompType=jobcomp/none
$nodeline NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF

dbd_conf_changed=0
put_file "$SLURMDBD_CONF" 0600 slurm:slurm <<EOF && dbd_conf_changed=1 || true
# Written by .ci/slurm-up.sh. slurmdbd logs into MariaDB as OS user slurm (unix_socket auth).
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
SlurmUser=slurm
DebugLevel=info
LogFile=$LOGDIR/slurmdbd.log
PidFile=$DBD_PID
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StorageLoc=slurm_acct_db
EOF

# ---------------------------------------------------------------- slurmdbd
if ((dbd_conf_changed)) && is_running slurmdbd "$DBD_PID"; then
    stop_daemon slurmdbd "$DBD_PID"
fi
dbd_ok() { timeout 10 sacctmgr -n -P show cluster format=cluster; }
if is_running slurmdbd "$DBD_PID"; then
    log "slurmdbd already running"
else
    log "starting slurmdbd"
    slurmdbd </dev/null >/dev/null 2>&1 || die "slurmdbd failed to start" "$LOGDIR/slurmdbd.log"
fi
wait_for "slurmdbd answers sacctmgr" dbd_ok \
    || die "slurmdbd does not answer" "$LOGDIR/slurmdbd.log" "$MYSQL_LOG"

# Register the cluster before slurmctld starts, so slurmctld registers cleanly.
if ! sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER"; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null
    log "added cluster $CLUSTER to the accounting database"
fi

# ---------------------------------------------------------------- slurmctld + slurmd
if ((slurm_conf_changed)); then
    # slurm.conf changed under running daemons: restart them (job state is kept in the spool dir).
    is_running slurmd "$SLURMD_PID" && stop_daemon slurmd "$SLURMD_PID"
    is_running slurmctld "$CTLD_PID" && stop_daemon slurmctld "$CTLD_PID"
fi
if is_running slurmctld "$CTLD_PID"; then
    log "slurmctld already running"
else
    log "starting slurmctld"
    slurmctld </dev/null >/dev/null 2>&1 || die "slurmctld failed to start" "$LOGDIR/slurmctld.log"
fi
wait_for "slurmctld answers" scontrol ping \
    || die "slurmctld does not answer" "$LOGDIR/slurmctld.log"

if is_running slurmd "$SLURMD_PID"; then
    log "slurmd already running"
else
    log "starting slurmd"
    slurmd </dev/null >/dev/null 2>&1 || die "slurmd failed to start" "$LOGDIR/slurmd.log"
fi

# Wait for the node to be usable. A node that was DOWN/DRAINED (e.g. after slurmd was
# restarted or killed) is resumed.
deadline=$((SECONDS + TIMEOUT))
last_resume=-100
while :; do
    state=$(sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | head -n 1 || true)
    case $state in
        idle | mixed | allocated | completing) break ;;
        down* | drain* | fail*)
            if ((SECONDS - last_resume >= 5)); then
                log "node $NODE is '$state'; scontrol update nodename=$NODE state=resume"
                scontrol update nodename="$NODE" state=resume 2>/dev/null || true
                last_resume=$SECONDS
            fi
            ;;
    esac
    if ((SECONDS >= deadline)); then
        scontrol show node "$NODE" >&2 || true
        die "node $NODE not up after ${TIMEOUT}s (state: '${state:-none}')" \
            "$LOGDIR/slurmd.log" "$LOGDIR/slurmctld.log"
    fi
    sleep 1
done
log "node $NODE is $state"

# ---------------------------------------------------------------- accounts
if ! sacctmgr -n -P show account format=account | grep -qx "$ACCOUNT"; then
    sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" description="ncreel tests" organization=ncreel >/dev/null
    log "added account $ACCOUNT"
fi
if ! sacctmgr -n -P show assoc where cluster="$CLUSTER" account="$ACCOUNT" user=root format=user | grep -qx root; then
    sacctmgr -i add user root account="$ACCOUNT" cluster="$CLUSTER" defaultaccount="$ACCOUNT" >/dev/null
    log "added user root to account $ACCOUNT"
fi
wait_for "sacct" sacct -n -X \
    || die "sacct does not work" "$LOGDIR/slurmdbd.log" "$LOGDIR/slurmctld.log"

# ---------------------------------------------------------------- summary
echo "slurm-up: Slurm is up after $((SECONDS - START))s (cluster $CLUSTER, node $NODE)"
sinfo
sacctmgr -P show assoc where cluster="$CLUSTER" format=cluster,account,user
