#!/usr/bin/env bash
# Stop the single-node Slurm started by .ci/slurm-up.sh: slurmd, slurmctld, slurmdbd, mariadbd,
# munged. Configuration, accounting database and job state are kept, so slurm-up.sh brings the
# same cluster back. Safe to run when nothing is running. Run as root.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}

[[ $(id -u) -eq 0 ]] || { echo "slurm-down: must run as root" >&2; exit 1; }

# shellcheck source=.ci/slurm-common.sh
source "$(dirname "$0")/slurm-common.sh"

# stop_daemon NAME PIDFILE: SIGTERM, wait up to 30 s, then SIGKILL.
stop_daemon() {
    local name=$1 pidfile=$2 pid i
    pid=$(daemon_pid "$name" "$pidfile")
    if [[ -z $pid ]]; then
        echo "slurm-down: $name not running"
        return 0
    fi
    echo "slurm-down: stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 30; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$pidfile"
            return 0
        fi
        sleep 1
    done
    echo "slurm-down: $name (pid $pid) ignored SIGTERM for 30 s; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$pidfile"
}

stop_daemon slurmd /run/slurmd.pid
stop_daemon slurmctld /run/slurmctld.pid
stop_daemon slurmdbd /run/slurmdbd.pid
stop_daemon mariadbd /run/mysqld/mysqld.pid
stop_daemon munged /run/munge/munged.pid
echo "slurm-down: done"
