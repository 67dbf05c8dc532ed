#!/usr/bin/env bash
# Run a node's daemon in a mount namespace where that node shares nothing with the submitting
# machine (RIG_ISOLATED=1; scripts/rig/bin/hadoop runs it through unshare as RIG_WRAP):
#
#   unshare --mount --propagation private -- bash isolate.sh NODE_DIR KEEP... -- CMD [ARG...]
#
# Hidden (an empty folder mounted over each): /tmp, /root, /home, the user's home, and the
# folders of RIG_HIDE (the project's checkout, its virtualenv). Kept: NODE_DIR (its conf, logs,
# NodeManager and DataNode folders) and each KEEP (Java, the Hadoop jars, a keytab folder).
# Nothing of the other nodes or of the submitter's Python is left: only the operating system.
set -euo pipefail
node=$1; shift
keep=("$node")
while [ "$1" != -- ]; do keep+=("$1"); shift; done
shift
stage=$(mktemp -d /run/subm-rig-stage.XXXXXX 2>/dev/null || mktemp -d /dev/shm/subm-rig-stage.XXXXXX)
mount -t tmpfs -o size=1m tmpfs "$stage"
n=0
for k in "${keep[@]}"; do
  mkdir -p "$stage/$n"; mount --bind "$k" "$stage/$n"; n=$((n + 1))
done
hide=(/tmp /root /home "${HOME:-/root}")
for h in ${RIG_HIDE:-}; do hide+=("$h"); done
for h in "${hide[@]}"; do
  [ -d "$h" ] || continue
  mode=755; [ "$h" = /tmp ] && mode=1777
  mount -t tmpfs -o "mode=$mode" tmpfs "$h"
done
n=0
for k in "${keep[@]}"; do
  mkdir -p "$k"; mount --move "$stage/$n" "$k"; n=$((n + 1))
done
umount "$stage" 2>/dev/null || true
cd "$node"
exec "$@"
