#!/usr/bin/env bash
# A Ray cluster of two nodes on this host (a head and a worker node, each a raylet of its own), for
# running medexp's Ray launcher against a real multi-node Ray and for the tests marked `cluster`.
#
#   scripts/local_ray.sh up       # start the head and the worker node
#   eval "$(scripts/local_ray.sh env)"   # RAY_ADDRESS and its token, for `ray status` and `ray.init("auto")`
#   scripts/local_ray.sh status   # `ray status` of the cluster
#   scripts/local_ray.sh down     # stop the processes `up` started (by their pid file), nothing else
#
# Each node offers $MEDEXP_RAY_CPUS_PER_NODE CPUs (1) and a resource naming it (medexp_node_head,
# medexp_node_worker): with the launcher's num_cpus=1 per cell, two cells run at once, one per node.
# State (Ray's session directory with its logs and sockets, the pid file) lives under
# $MEDEXP_RAY_DIR, default /tmp/medexp-ray-<uid>: Ray nests Unix sockets under it and a socket path
# may not exceed 107 bytes, so a deep directory (a checkout's) would not do. Ray comes from the
# Python environment on PATH (`pip install -e ".[ray]"`). `ray stop` is never used: it stops every
# Ray on the host, ours or not. Port: $MEDEXP_RAY_PORT (6390), on 127.0.0.1 only. Every client (the
# worker node, `ray status`, a driver's `ray.init`) authenticates with the cluster's token, kept in
# $MEDEXP_RAY_DIR/auth_token: `env` prints the variables that point Ray at it.
set -euo pipefail

DIR="${MEDEXP_RAY_DIR:-/tmp/medexp-ray-$(id -u)}"
PORT="${MEDEXP_RAY_PORT:-6390}"
CPUS="${MEDEXP_RAY_CPUS_PER_NODE:-1}"
ADDRESS="127.0.0.1:$PORT"
PIDS="$DIR/ray.pids"
TOKEN="$DIR/auth_token"
export RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$TOKEN"

die() { echo "local_ray: $*" >&2; exit 1; }
say() { echo "local_ray: $*"; }

# A process that exists and is not a zombie (an exited daemon whose parent, PID 1 in some
# containers, never reaps it keeps its /proc entry).
alive() { local state; state="$(ps -o stat= -p "$1" 2>/dev/null)" && [[ "$state" != Z* ]]; }

# Live pids among those `up` recorded, and their children (the task workers a raylet started since).
live_pids() {
    [[ -s "$PIDS" ]] || return 0
    local pid child
    while read -r pid; do
        alive "$pid" || continue
        echo "$pid"
        for child in $(pgrep -P "$pid"); do alive "$child" && echo "$child"; done
    done <"$PIDS" | sort -un
    return 0
}

# Every process whose command line names our session directory (gcs_server, raylets, monitors,
# dashboard), and their children (the raylets' agents and workers).
cluster_pids() {
    local roots pid
    roots="$(pgrep -f -- "$DIR/session" || true)"
    for pid in $roots; do echo "$pid"; pgrep -P "$pid" || true; done | sort -un
}

up() {
    command -v ray >/dev/null || die "no \`ray\` on PATH: install medexp's Ray extra (pip install -e \".[ray]\")"
    if [[ -n "$(live_pids)" ]]; then say "already up ($(live_pids | wc -l) processes); \`down\` first to restart"; return; fi
    mkdir -p "$DIR"
    chmod 0700 "$DIR"
    if [[ ! -s "$TOKEN" ]]; then
        (umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TOKEN")
    fi
    local common=(--node-ip-address=127.0.0.1 --num-cpus="$CPUS" --num-gpus=0 --disable-usage-stats)
    ray start --head --port="$PORT" --temp-dir="$DIR" --include-dashboard=false --dashboard-host=127.0.0.1 \
        "${common[@]}" --resources='{"medexp_node_head": 1}' >"$DIR/head.log" 2>&1 \
        || die "the head did not start (see $DIR/head.log)"
    ray start --address="$ADDRESS" "${common[@]}" --resources='{"medexp_node_worker": 1}' \
        >"$DIR/worker.log" 2>&1 || { cluster_pids >"$PIDS"; die "the worker node did not start (see $DIR/worker.log)"; }
    cluster_pids >"$PIDS"
    local nodes=""
    for _ in $(seq 60); do
        nodes="$(ray status --address="$ADDRESS" 2>/dev/null | grep -c '^ 1 node_' || true)"
        [[ "$nodes" == 2 ]] && break
        sleep 0.5
    done
    [[ "$nodes" == 2 ]] || die "the cluster shows ${nodes:-0} nodes, not 2 (see $DIR/session_latest/logs)"
    say "2 nodes up at $ADDRESS ($(wc -l <"$PIDS") processes, pids in $PIDS)"
    environment
}

environment() {
    echo "export RAY_ADDRESS=$ADDRESS RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$TOKEN"
}

down() {
    local pids
    pids="$(live_pids)"
    [[ -n "$pids" ]] || { say "nothing to stop"; rm -f "$PIDS"; return; }
    # shellcheck disable=SC2086
    kill $pids 2>/dev/null || true
    for _ in $(seq 50); do [[ -z "$(live_pids)" ]] && break; sleep 0.2; done
    pids="$(live_pids)"
    if [[ -n "$pids" ]]; then
        say "$(echo "$pids" | wc -w) processes ignored SIGTERM; sending SIGKILL"
        # shellcheck disable=SC2086
        kill -9 $pids 2>/dev/null || true
        # A killed process lingers until the kernel has torn it down: `down` returns once they are gone.
        for _ in $(seq 50); do [[ -z "$(live_pids)" ]] && break; sleep 0.1; done
        [[ -z "$(live_pids)" ]] || die "processes $(live_pids | tr '\n' ' ')survived SIGKILL"
    fi
    rm -f "$PIDS"
    say "stopped"
}

status() {
    if [[ -z "$(live_pids)" ]]; then echo "local Ray: down"; return; fi
    echo "local Ray: up at $ADDRESS ($(live_pids | wc -l) processes)"
    ray status --address="$ADDRESS"
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) status ;;
    env) environment ;;
    *) echo "usage: $0 up|down|status|env   (state under \$MEDEXP_RAY_DIR, default /tmp/medexp-ray-<uid>)" >&2; exit 2 ;;
esac
