#!/usr/bin/env bash
# A one-host Slurm cluster (munged, slurmctld and slurmd on this machine) from Debian's packages,
# for running medexp's Slurm launcher for real and for the tests marked `cluster`.
#
#   scripts/local_slurm.sh up       # install slurm-wlm and munge if missing, write the config, start the daemons
#   eval "$(scripts/local_slurm.sh env)"   # SLURM_CONF for sinfo, srun, sbatch and medexp's submitit launcher
#   scripts/local_slurm.sh status   # the daemons and `sinfo`
#   scripts/local_slurm.sh down     # stop the daemons `up` started (by their pid files), keep the directory
#
# Everything lives under one directory, $MEDEXP_SLURM_DIR (default: <repo>/.slurm-local, git-ignored):
# slurm.conf, the munge key and socket, the controller's and node's state, logs and pid files. The
# system's /etc/slurm and /etc/munge are neither read nor written, and no system service is started.
# The node has this host's CPUs and memory (`slurmd -C`); one partition, `local`, is the default.
# Slurm's daemons run as root here (jobs run as the submitting user), so `up` needs root.
# Ports: $MEDEXP_SLURMCTLD_PORT (6817) and $MEDEXP_SLURMD_PORT (6818).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${MEDEXP_SLURM_DIR:-$ROOT/.slurm-local}"
CTLD_PORT="${MEDEXP_SLURMCTLD_PORT:-6817}"
SLURMD_PORT="${MEDEXP_SLURMD_PORT:-6818}"
CONF="$DIR/slurm.conf"
SOCKET="$DIR/munge/munge.socket"
NODE="$(hostname -s)"
PARTITION=local

die() { echo "local_slurm: $*" >&2; exit 1; }
say() { echo "local_slurm: $*"; }

# The daemons `up` started: name -> pid file. Only these are ever stopped.
pidfile() { echo "$DIR/run/$1.pid"; }
running() {  # running <name>: its pid file names a live process of that program
    local file pid
    file="$(pidfile "$1")"
    [[ -s "$file" ]] || return 1
    pid="$(cat "$file")"
    [[ -r "/proc/$pid/comm" ]] && [[ "$(cat "/proc/$pid/comm")" == "$1" ]]
}

need_root() {
    [[ "$(id -u)" == 0 ]] || die "must run as root: slurmd starts jobs as their users and munged, slurmctld and slurmd
run as root in this one-host setup (and installing slurm-wlm and munge needs apt). Run it with sudo, or use a
real cluster (docs/clusters.md)."
}

install_packages() {
    local missing=()
    command -v munged >/dev/null || missing+=(munge)
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
        || missing+=(slurm-wlm)
    [[ ${#missing[@]} == 0 ]] && return
    command -v apt-get >/dev/null || die "${missing[*]} missing and no apt-get: install Slurm and munge yourself"
    say "installing ${missing[*]} from the Debian registry"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >"$DIR/log/apt.log" 2>&1 || {
        apt-get update -qq >>"$DIR/log/apt.log" 2>&1
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >>"$DIR/log/apt.log" 2>&1
    } || die "could not install ${missing[*]} (see $DIR/log/apt.log)"
}

write_config() {
    # This host as slurmd sees it (CPUs, sockets, cores, threads, memory in MB): a node that claims
    # more than the host has is drained by slurmctld ("Low RealMemory").
    local node_line
    node_line="$(slurmd -C | head -1 | sed "s/^NodeName=[^ ]*/NodeName=$NODE/")"
    cat >"$CONF.tmp" <<EOF
# Written by scripts/local_slurm.sh: a one-host cluster; edits are overwritten by the next \`up\`.
ClusterName=medexp-local
SlurmctldHost=$NODE
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCKET
CredType=cred/munge
StateSaveLocation=$DIR/state/slurmctld
SlurmdSpoolDir=$DIR/state/slurmd
SlurmctldPidFile=$(pidfile slurmctld)
SlurmdPidFile=$(pidfile slurmd)
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# No cgroups in a container: track processes through /proc, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
# A node that went DOWN (slurmd restarted) comes back by itself.
ReturnToService=2
# Requeued jobs (scontrol requeue, submitit's checkpointing on preemption) may start again at once.
JobRequeue=1
MinJobAge=300
$node_line State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
    mv "$CONF.tmp" "$CONF"
}

start_munged() {
    if running munged; then say "munged already running (pid $(cat "$(pidfile munged)"))"; return; fi
    if [[ ! -s "$DIR/munge/munge.key" ]]; then
        mungekey --create --keyfile="$DIR/munge/munge.key" 2>/dev/null \
            || dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    fi
    chmod 0400 "$DIR/munge/munge.key"
    # --force: the directory checks munged makes for a system install do not fit a key under a
    # checkout (whose parents may be group-writable); the key itself is private to root.
    munged --force --key-file="$DIR/munge/munge.key" --socket="$SOCKET" --pid-file="$(pidfile munged)" \
        --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
    say "munged started (pid $(cat "$(pidfile munged)"))"
}

start_daemon() {  # start_daemon <slurmctld|slurmd> <args...>
    local name="$1"; shift
    if running "$name"; then say "$name already running (pid $(cat "$(pidfile "$name")"))"; return; fi
    "$name" -f "$CONF" "$@"
    for _ in $(seq 50); do running "$name" && break; sleep 0.2; done
    running "$name" || die "$name did not start; see $DIR/log/$name.log"
    say "$name started (pid $(cat "$(pidfile "$name")"))"
}

wait_for_node() {
    export SLURM_CONF="$CONF"
    local state=""
    for _ in $(seq 60); do
        state="$(sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | head -1 || true)"
        [[ "$state" == idle* || "$state" == mixed* || "$state" == allocated* ]] && break
        if [[ "$state" == drain* ]]; then  # left drained by an earlier run (e.g. memory changed)
            scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
        fi
        sleep 0.5
    done
    [[ "$state" == idle* || "$state" == mixed* || "$state" == allocated* ]] \
        || die "node $NODE is '${state:-unknown}' (see $DIR/log/slurmctld.log, $DIR/log/slurmd.log and docs/clusters.md)"
    say "node $NODE $state in partition $PARTITION"
}

up() {
    need_root
    mkdir -p "$DIR"/{munge,run,log,state/slurmctld,state/slurmd}
    chmod 0700 "$DIR/munge"
    install_packages
    # A config change needs the daemons restarted; an unchanged one leaves running daemons alone.
    local before=""; [[ -f "$CONF" ]] && before="$(cat "$CONF")"
    write_config
    if [[ -n "$before" && "$before" != "$(cat "$CONF")" ]] && { running slurmctld || running slurmd; }; then
        say "slurm.conf changed: restarting slurmctld and slurmd"
        stop slurmd; stop slurmctld
    fi
    start_munged
    start_daemon slurmctld
    start_daemon slurmd -N "$NODE"
    wait_for_node
    echo "export SLURM_CONF=$CONF"
}

stop() {  # stop <name>: SIGTERM the process of its pid file, wait for it
    local name="$1" pid
    if ! running "$name"; then rm -f "$(pidfile "$name")"; return; fi
    pid="$(cat "$(pidfile "$name")")"
    kill "$pid"
    for _ in $(seq 100); do [[ -d "/proc/$pid" ]] || break; sleep 0.1; done
    if [[ -d "/proc/$pid" ]]; then say "$name (pid $pid) ignored SIGTERM; sending SIGKILL"; kill -9 "$pid"; fi
    rm -f "$(pidfile "$name")"
    say "$name (pid $pid) stopped"
}

down() {
    [[ -d "$DIR" ]] || { say "nothing to stop: $DIR does not exist"; return; }
    stop slurmd
    stop slurmctld
    stop munged
}

status() {
    for name in munged slurmctld slurmd; do
        if running "$name"; then echo "$name: running (pid $(cat "$(pidfile "$name")"))"; else echo "$name: stopped"; fi
    done
    if running slurmctld; then SLURM_CONF="$CONF" sinfo; fi
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) status ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    *) echo "usage: $0 up|down|status|env   (state under \$MEDEXP_SLURM_DIR, default $ROOT/.slurm-local)" >&2; exit 2 ;;
esac
