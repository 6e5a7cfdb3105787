# Shared by slurm-up.sh and slurm-down.sh (sourced, not run).

# daemon_pid NAME PIDFILE: print the pid of the running daemon (pid file first, then the
# exact process name); prints nothing if it is not running.
daemon_pid() {
    local name=$1 pidfile=$2 pid
    if [[ -s $pidfile ]]; then
        pid=$(<"$pidfile")
        if [[ $pid =~ ^[0-9]+$ ]] && [[ -r /proc/$pid/comm ]] && [[ $(</proc/"$pid"/comm) == "$name" ]]; then
            echo "$pid"; return 0
        fi
    fi
    pgrep -x "$name" | head -n 1 || true
}
