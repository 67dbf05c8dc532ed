#!/usr/bin/env bash
# Start or stop one node (its NodeManager and its DataNode) of a rig made by scripts/rig.sh.
#
#   RIG_DIR=DIR bash scripts/rig/node.sh stop 2           # node 2 shuts down cleanly
#   RIG_DIR=DIR FORCE=1 bash scripts/rig/node.sh stop 2   # node 2 dies: its daemons and every
#                                                         # process of its containers kill -9
#   RIG_DIR=DIR bash scripts/rig/node.sh start 2          # it comes back and registers again
#
# With RIG_ISOLATED=1 (in DIR/env.sh) the node's daemons, and so its containers, run in a mount
# namespace of their own (scripts/rig/isolate.sh).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
action=${1:?usage: node.sh start|stop N}; n=${2:?usage: node.sh start|stop N}
RIG_DIR=${RIG_DIR:?set RIG_DIR to the folder of the rig}
# shellcheck disable=SC1091
source "$RIG_DIR/env.sh"
node=$RIG_DIR/node$n
[ -d "$node/conf" ] || { echo "node.sh: no node $n in $RIG_DIR" >&2; exit 2; }
export HADOOP_CONF_DIR=$node/conf HADOOP_COMMON_HOME=$HADOOP_HOME HADOOP_HDFS_HOME=$HADOOP_HOME \
  HADOOP_YARN_HOME=$HADOOP_HOME
[ -f "$RIG_DIR/node-env.sh" ] && source "$RIG_DIR/node-env.sh"   # a mode's additions (Kerberos)

if [ "$action" = stop ] && [ "${FORCE:-}" = 1 ]; then
  # Like a machine that dies: kill -9 its daemons and every process working in one of its
  # container folders, with no clean shutdown of anything.
  for pidf in "$node"/pids/*.pid; do
    [ -f "$pidf" ] && kill -9 "$(cat "$pidf")" 2>/dev/null; rm -f "$pidf"
  done
  for _ in 1 2 3; do
    for d in /proc/[0-9]*; do
      case "$(readlink "$d/cwd" 2>/dev/null)" in "$node"/nm-local/*) kill -9 "${d#/proc/}" 2>/dev/null ;; esac
    done
  done
  exit 0
fi
if [ "$action" = start ] && [ "${RIG_ISOLATED:-}" = 1 ]; then
  # What a node has: the OS, Java, the Hadoop jars, its folder (and the rig's keytabs), and
  # the rig's one shared folder, mounted on every node as an NFS share would be.
  export PATH=$HADOOP_HOME/bin:$JAVA_HOME/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  keep=("$JAVA_HOME" "$HADOOP_HOME")
  [ -n "${RIG_SHARED:-}" ] && mkdir -p "$RIG_SHARED" && keep+=("$RIG_SHARED")
  [ -n "${RIG_KEEP:-}" ] && keep+=($RIG_KEEP)
  cp -f "$here/isolate.sh" "$HADOOP_HOME/bin/rig-isolate"
  export RIG_WRAP="unshare --mount --propagation private -- bash $HADOOP_HOME/bin/rig-isolate $node ${keep[*]} --"
fi
hdfs --daemon "$action" datanode &
yarn --daemon "$action" nodemanager
wait
