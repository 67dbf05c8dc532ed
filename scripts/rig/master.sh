#!/usr/bin/env bash
# Kill, restart or ask about one master of a rig started with RIG_HA=1 (scripts/rig.sh), as
# scripts/rig/node.sh does for nodes. Master 1 (nn1, rm1) runs on RIG_HOST, master 2 (nn2, rm2)
# on RIG_MASTER2, each from its folder DIR/master<m> (conf, logs, pids).
#
#   bash scripts/rig/master.sh DIR active nn|rm              # prints 1 or 2: the active one
#   bash scripts/rig/master.sh DIR kill nn|rm active|standby|1|2
#                                     # kill -9 that master's NameNode or ResourceManager
#                                     # (FORCE=1, nn: its ZKFC too, as when the machine dies);
#                                     # prints the number of the master killed
#   bash scripts/rig/master.sh DIR start nn|rm 1|2           # start it again, same configuration
#                                     # (nn: its ZKFC too, where that is not running)
#
# `active` asks the web endpoints (the NameNodes' NameNodeStatus bean, the ResourceManagers'
# /ws/v1/cluster/info: what `hdfs haadmin -getServiceState nn1` and `yarn rmadmin
# -getServiceState rm1` say, without a JVM each), over HTTPS with RIG_TLS=1, by SPNEGO with
# RIG_KERBEROS=1.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage="usage: master.sh DIR active nn|rm | kill nn|rm active|standby|1|2 | start nn|rm 1|2"
dir=$(cd "${1:?$usage}" && pwd); action=${2:?$usage}; kind=${3:?$usage}
# shellcheck disable=SC1091
source "$dir/env.sh"
# shellcheck disable=SC1091
[ -f "$dir/master-env.sh" ] && source "$dir/master-env.sh"   # Kerberos: a ticket (nn's)
[ "${RIG_HA:-}" = 1 ] || { echo "master.sh: the rig in $dir has one master (RIG_HA=1 starts two)" >&2; exit 2; }
case $kind in nn) daemon=namenode tool=hdfs ;; rm) daemon=resourcemanager tool=yarn ;; *) echo "$usage" >&2; exit 2 ;; esac

active() { python3 "$here/wait.py" "$dir" --active "$kind"; }
which() {  # active|standby|1|2 -> 1|2
  case $1 in
    1|2) echo "$1" ;;
    active) active ;;
    standby) echo $(( 3 - $(active) )) ;;
    *) echo "$usage" >&2; return 2 ;;
  esac
}
pidfile() { echo "$dir/master$1/pids/hadoop-$(id -un)-$2.pid"; }

case $action in
  active) active ;;
  kill)
    m=$(which "${4:?$usage}")
    daemons=("$daemon")
    [ "$kind" = nn ] && [ "${FORCE:-}" = 1 ] && daemons+=(zkfc)
    for d in "${daemons[@]}"; do
      f=$(pidfile "$m" "$d")
      [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || echo "master.sh: no $d running on master $m" >&2
      rm -f "$f"
    done
    echo "$m" ;;
  start)
    m=${4:?$usage}
    [[ $m =~ ^[12]$ ]] || { echo "$usage" >&2; exit 2; }
    export HADOOP_CONF_DIR=$dir/master$m/conf
    "$tool" --daemon start "$daemon"
    if [ "$kind" = nn ] && ! hdfs --daemon status zkfc >/dev/null 2>&1; then hdfs --daemon start zkfc; fi ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
