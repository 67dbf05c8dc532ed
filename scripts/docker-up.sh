#!/usr/bin/env bash
# Make sure a Docker daemon is reachable; start one if not.  Idempotent.
#
#   scripts/docker-up.sh            # exit 0 once `docker info` works
#
# Behaviour:
#   * `docker info` already works            -> exit 0, nothing else done.
#   * `dockerd` missing                      -> apt-get install -y docker.io
#                                               (apt-get update + retry if that fails).
#   * start dockerd in the background (host networking only, no iptables,
#     no bridge) logging to $SUBM_DOCKERD_LOG (default /tmp/subm-dockerd.log),
#     wait up to $SUBM_DOCKER_WAIT seconds (default 30) for `docker info`.
#   * If the default storage driver (overlay2) does not come up, retry once
#     with `--storage-driver vfs` (slow but works almost anywhere).
#   * On failure: exit 1 with exactly one line on stderr.
#
# Containers on this daemon must be run with `--network host` (no bridge).
# Extra dockerd flags can be passed through $SUBM_DOCKERD_FLAGS.
set -uo pipefail

LOG="${SUBM_DOCKERD_LOG:-/tmp/subm-dockerd.log}"
WAIT="${SUBM_DOCKER_WAIT:-30}"
BASE_FLAGS=(--iptables=false --bridge=none)
# shellcheck disable=SC2206
EXTRA_FLAGS=(${SUBM_DOCKERD_FLAGS:-})

die() { echo "docker-up: $*" >&2; exit 1; }

docker_ok() { docker info >/dev/null 2>&1; }

docker_ok && exit 0

[ "$(id -u)" = 0 ] || die "docker daemon not reachable and not running as root; cannot start dockerd"

export DEBIAN_FRONTEND=noninteractive
if ! command -v dockerd >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || die "dockerd missing and apt-get unavailable"
    if ! apt-get install -y docker.io >>"$LOG" 2>&1; then
        { apt-get update && apt-get install -y docker.io; } >>"$LOG" 2>&1 \
            || die "apt-get install docker.io failed (see $LOG)"
    fi
    command -v dockerd >/dev/null 2>&1 || die "docker.io installed but dockerd not on PATH"
fi
command -v docker >/dev/null 2>&1 || die "docker client not on PATH"

# A dockerd may already be running but still initialising (e.g. started by a
# concurrent invocation): give it the full wait before starting another one.
wait_for_docker() {  # $1 = pid of the dockerd we started ("" if none)
    local i
    for ((i = 0; i < WAIT * 2; i++)); do
        docker_ok && return 0
        if [ -n "${1:-}" ] && ! kill -0 "$1" 2>/dev/null; then
            return 1   # our dockerd died
        fi
        sleep 0.5
    done
    docker_ok
}

if pgrep -x dockerd >/dev/null 2>&1; then
    wait_for_docker "" && exit 0
    die "a dockerd process is running but \`docker info\` fails after ${WAIT}s (see $LOG)"
fi

start_dockerd() {  # extra flags...
    echo "=== $(date -u +%FT%TZ) docker-up: dockerd ${BASE_FLAGS[*]} ${EXTRA_FLAGS[*]} $*" >>"$LOG"
    # setsid: detach from the caller's session/process group so the daemon
    # outlives the shell that started it.
    setsid dockerd "${BASE_FLAGS[@]}" "${EXTRA_FLAGS[@]}" "$@" >>"$LOG" 2>&1 </dev/null &
    DOCKERD_PID=$!
    wait_for_docker "$DOCKERD_PID"
}

start_dockerd && exit 0

# Did not come up.  If it is still alive, it is merely slow: don't fight it.
if kill -0 "$DOCKERD_PID" 2>/dev/null; then
    die "dockerd (pid $DOCKERD_PID) started but \`docker info\` fails after ${WAIT}s (see $LOG)"
fi
# It died: most sandbox failures are overlay2/storage related -> try vfs once,
# unless the caller already chose a storage driver.
case " ${EXTRA_FLAGS[*]} " in
    *" --storage-driver"*|*" -s "*) ;;
    *)
        rm -f /var/run/docker.pid
        start_dockerd --storage-driver vfs && exit 0
        ;;
esac
last_err=$(grep -iE 'level=(fatal|error)' "$LOG" 2>/dev/null | tail -n1 | cut -c1-200)
die "dockerd failed to start (see $LOG)${last_err:+: $last_err}"
