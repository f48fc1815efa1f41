#!/usr/bin/env bash
# A one-host Slurm cluster (munged, slurmctld and slurmd on this machine) from Debian's packages,
# for running medexp's Slurm launcher for real and for the tests marked `cluster`.
#
#   scripts/local_slurm.sh up                # install slurm-wlm and munge if missing, write the config, start the daemons
#   scripts/local_slurm.sh up --accounting   # the same with accounting as sites run it: slurmdbd backed by MariaDB
#                                            # (slurmdbd and mariadb-server installed if missing), so that sacct
#                                            # reports COMPLETED, CANCELLED, TIMEOUT, NODE_FAIL, ...
#   eval "$(scripts/local_slurm.sh env)"     # SLURM_CONF for sinfo, srun, sbatch, sacct and medexp's Slurm launcher
#   scripts/local_slurm.sh status            # the daemons and `sinfo`
#   scripts/local_slurm.sh down              # stop the daemons `up` started (by their pid files), keep the directory
#
# Everything lives under one directory, $MEDEXP_SLURM_DIR (default: <repo>/.slurm-local, git-ignored):
# slurm.conf and slurmdbd.conf, the munge key and socket, the controller's and node's state, the
# database, the logs and the pid files. The system's /etc/slurm, /etc/munge and /etc/mysql are
# neither read nor written, and no system service is started. The node has this host's CPUs and
# memory (`slurmd -C`); one partition, `local`, is the default. The daemons (MariaDB included) run
# as root here (jobs run as the submitting user), so `up` needs root. `up` is idempotent: running
# daemons are left alone, and a changed configuration restarts the daemons that read it; `up`
# without --accounting on a cluster that had it stops slurmdbd and MariaDB (their data stays).
# Ports, all on this host: $MEDEXP_SLURMCTLD_PORT (6817), $MEDEXP_SLURMD_PORT (6818),
# $MEDEXP_SLURMDBD_PORT (6819) and MariaDB's $MEDEXP_SLURM_DB_PORT (6820, on 127.0.0.1 only).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${MEDEXP_SLURM_DIR:-$ROOT/.slurm-local}"
CTLD_PORT="${MEDEXP_SLURMCTLD_PORT:-6817}"
SLURMD_PORT="${MEDEXP_SLURMD_PORT:-6818}"
DBD_PORT="${MEDEXP_SLURMDBD_PORT:-6819}"
DB_PORT="${MEDEXP_SLURM_DB_PORT:-6820}"
CONF="$DIR/slurm.conf"
DBD_CONF="$DIR/slurmdbd.conf"  # slurmdbd reads it from the directory of SLURM_CONF
SOCKET="$DIR/munge/munge.socket"
DB_DATA="$DIR/db/data"
DB_SOCKET="$DIR/run/mariadb.sock"
DB_NAME=slurm_acct_db
NODE="$(hostname -s)"
PARTITION=local
CLUSTER=medexp-local

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

install_packages() {  # install_packages <accounting: 0|1>
    local missing=()
    command -v munged >/dev/null || missing+=(munge)
    command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
        || missing+=(slurm-wlm)
    if [[ "$1" == 1 ]]; then
        command -v slurmdbd >/dev/null || missing+=(slurmdbd)
        command -v mariadbd >/dev/null && command -v mariadb-install-db >/dev/null || missing+=(mariadb-server)
    fi
    [[ ${#missing[@]} == 0 ]] && return
    command -v apt-get >/dev/null || die "${missing[*]} missing and no apt-get: install them yourself"
    say "installing ${missing[*]} from the Debian registry"
    # policy-rc.d keeps the packages' own services (the system MariaDB, munge) from starting.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >"$DIR/log/apt.log" 2>&1 || {
        apt-get update -qq >>"$DIR/log/apt.log" 2>&1
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >>"$DIR/log/apt.log" 2>&1
    } || die "could not install ${missing[*]} (see $DIR/log/apt.log)"
}

accounting_lines() {  # accounting_lines <0|1>: slurm.conf's accounting settings
    if [[ "$1" == 1 ]]; then
        cat <<EOF
# Accounting as sites run it: every job's record in slurmdbd (MariaDB), where sacct reads it.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$NODE
AccountingStoragePort=$DBD_PORT
# The munge socket for talking to slurmdbd (sacct, sacctmgr, slurmctld): AuthInfo does not reach it.
AccountingStoragePass=$SOCKET
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
EOF
    else
        printf '%s\n' "JobAcctGatherType=jobacct_gather/none" "AccountingStorageType=accounting_storage/none"
    fi
}

write_config() {  # write_config <accounting: 0|1>
    # This host as slurmd sees it (CPUs, sockets, cores, threads, memory in MB): a node that claims
    # more than the host has is drained by slurmctld ("Low RealMemory").
    local node_line
    node_line="$(slurmd -C | head -1 | sed "s/^NodeName=[^ ]*/NodeName=$NODE/")"
    cat >"$CONF.tmp" <<EOF
# Written by scripts/local_slurm.sh: a one-host cluster; edits are overwritten by the next \`up\`.
ClusterName=$CLUSTER
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
$(accounting_lines "$1")
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

# --- accounting: MariaDB under $DIR/db, slurmdbd on top of it ---------------------------------------

db_password() {  # the password of slurmdbd's database user, made once (mode 0600)
    local file="$DIR/db/password"
    [[ -s "$file" ]] || (umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$file")
    cat "$file"
}

start_mariadb() {
    if running mariadbd; then say "mariadbd already running (pid $(cat "$(pidfile mariadbd)"))"; return; fi
    mkdir -p "$DB_DATA"
    chmod 0700 "$DIR/db"
    if [[ ! -d "$DB_DATA/mysql" ]]; then  # a new database: its system tables; root by unix socket only
        mariadb-install-db --no-defaults --datadir="$DB_DATA" --user=root --auth-root-authentication-method=socket \
            --skip-test-db >"$DIR/log/mariadb-install.log" 2>&1 \
            || die "mariadb-install-db failed (see $DIR/log/mariadb-install.log)"
    fi
    # --no-defaults: /etc/mysql is not read. innodb_lock_wait_timeout=900: what slurmdbd asks for.
    setsid mariadbd --no-defaults --datadir="$DB_DATA" --user=root --bind-address=127.0.0.1 --port="$DB_PORT" \
        --socket="$DB_SOCKET" --pid-file="$(pidfile mariadbd)" --log-error="$DIR/log/mariadb.log" \
        --skip-log-bin --innodb-buffer-pool-size=128M --innodb-lock-wait-timeout=900 </dev/null >/dev/null 2>&1 &
    for _ in $(seq 150); do
        running mariadbd && mariadb --no-defaults --socket="$DB_SOCKET" -u root -e 'select 1' >/dev/null 2>&1 && break
        sleep 0.2
    done
    running mariadbd || die "mariadbd did not start; see $DIR/log/mariadb.log"
    local password
    password="$(db_password)"
    mariadb --no-defaults --socket="$DB_SOCKET" -u root <<EOF || die "could not create slurmdbd's database user"
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$password';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$password';
CREATE DATABASE IF NOT EXISTS $DB_NAME;
GRANT ALL ON $DB_NAME.* TO 'slurm'@'127.0.0.1';
EOF
    say "mariadbd started (pid $(cat "$(pidfile mariadbd)"), 127.0.0.1:$DB_PORT)"
}

write_dbd_config() {  # slurmdbd.conf: mode 0600, it holds the database password
    (umask 077; cat >"$DBD_CONF.tmp" <<EOF
# Written by scripts/local_slurm.sh up --accounting; edits are overwritten by the next \`up\`.
AuthType=auth/munge
AuthInfo=socket=$SOCKET
DbdHost=$NODE
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$(pidfile slurmdbd)
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$(db_password)
StorageLoc=$DB_NAME
EOF
    )
    mv "$DBD_CONF.tmp" "$DBD_CONF"
}

start_slurmdbd() {
    if running slurmdbd; then say "slurmdbd already running (pid $(cat "$(pidfile slurmdbd)"))"; return; fi
    SLURM_CONF="$CONF" slurmdbd
    for _ in $(seq 150); do
        running slurmdbd && SLURM_CONF="$CONF" sacctmgr -n show cluster >/dev/null 2>&1 && break
        sleep 0.2
    done
    running slurmdbd || die "slurmdbd did not start; see $DIR/log/slurmdbd.log"
    # The cluster must be in the database before slurmctld registers with it.
    if ! SLURM_CONF="$CONF" sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER"; then
        SLURM_CONF="$CONF" sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr could not add $CLUSTER"
    fi
    say "slurmdbd started (pid $(cat "$(pidfile slurmdbd)"), port $DBD_PORT)"
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
        if [[ "$state" == drain* || "$state" == down* ]]; then  # left drained or down by an earlier run
            scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
        fi
        sleep 0.5
    done
    [[ "$state" == idle* || "$state" == mixed* || "$state" == allocated* ]] \
        || die "node $NODE is '${state:-unknown}' (see $DIR/log/slurmctld.log, $DIR/log/slurmd.log and docs/clusters.md)"
    say "node $NODE $state in partition $PARTITION"
}

up() {  # up [--accounting]
    local accounting=0
    case "${1:-}" in
        --accounting) accounting=1 ;;
        "") ;;
        *) die "unknown option $1 (up takes --accounting)" ;;
    esac
    need_root
    mkdir -p "$DIR"/{munge,run,log,db,state/slurmctld,state/slurmd}
    chmod 0700 "$DIR/munge" "$DIR/db"
    install_packages "$accounting"
    # A config change needs the daemons restarted; an unchanged one leaves running daemons alone.
    local before=""; [[ -f "$CONF" ]] && before="$(cat "$CONF")"
    write_config "$accounting"
    if [[ -n "$before" && "$before" != "$(cat "$CONF")" ]] && { running slurmctld || running slurmd; }; then
        say "slurm.conf changed: restarting slurmctld and slurmd"
        stop slurmd; stop slurmctld
    fi
    start_munged
    if [[ "$accounting" == 1 ]]; then
        local dbd_before=""; [[ -f "$DBD_CONF" ]] && dbd_before="$(cat "$DBD_CONF")"
        start_mariadb
        write_dbd_config
        if [[ -n "$dbd_before" && "$dbd_before" != "$(cat "$DBD_CONF")" ]]; then stop slurmdbd; fi
        start_slurmdbd
    else
        stop slurmdbd; stop mariadbd
    fi
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
    for _ in $(seq 300); do [[ -d "/proc/$pid" ]] || break; sleep 0.1; done
    if [[ -d "/proc/$pid" ]]; then say "$name (pid $pid) ignored SIGTERM; sending SIGKILL"; kill -9 "$pid"; fi
    rm -f "$(pidfile "$name")"
    say "$name (pid $pid) stopped"
}

down() {
    [[ -d "$DIR" ]] || { say "nothing to stop: $DIR does not exist"; return; }
    stop slurmd
    stop slurmctld
    stop slurmdbd
    stop mariadbd
    stop munged
}

status() {
    for name in munged mariadbd slurmdbd slurmctld slurmd; do
        if running "$name"; then echo "$name: running (pid $(cat "$(pidfile "$name")"))"; else echo "$name: stopped"; fi
    done
    if running slurmctld; then SLURM_CONF="$CONF" sinfo; fi
}

case "${1:-}" in
    up) up "${@:2}" ;;
    down) down ;;
    status) status ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    *) echo "usage: $0 up [--accounting]|down|status|env   (state under \$MEDEXP_SLURM_DIR, default $ROOT/.slurm-local)" >&2
       exit 2 ;;
esac
