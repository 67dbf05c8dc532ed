#!/usr/bin/env bash
# Run a command against a YARN rig of its own, started for it and stopped after it, whatever
# happens (exit, failure, Ctrl-C, SIGTERM). What CI does around the test suite:
#
#   bash scripts/with-rig.sh bash scripts/test.sh -q
#
# The rig (scripts/rig.sh: RIG_NODES=3 by default, RM recovery on) lives in a fresh folder
# under /tmp on loopback addresses nobody else uses, so a rig already up on this machine
# (/tmp/yarn-rig on localhost) is neither used nor disturbed. The command gets
# HADOOP_CONF_DIR/HADOOP_HOME/JAVA_HOME for it, its own skein config (SKEIN_CONFIG) and
# skein drivers (SUBM_SKEIN_HOME).
# RIG_COUNT=N starts N such rigs, alike, and names their folders in SUBM_TEST_RIGS
# (space-separated); the command gets the first one's settings. pytest-xdist's workers then take
# one each (tests/conftest.py): tests that stop nodes or restart the ResourceManager still have
# a cluster to themselves.
# The command's exit status is this script's.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -gt 0 ] || { echo "usage: with-rig.sh CMD [ARG...]" >&2; exit 2; }

dirs=()
for _ in $(seq "${RIG_COUNT:-1}"); do dirs+=("$(mktemp -d /tmp/subm-rig.XXXXXX)"); done
stop() {
  trap - EXIT INT TERM
  local d
  for d in "${dirs[@]}"; do bash "$repo/scripts/rig.sh" down "$d" & done
  wait
  if [ "${rc:-1}" = 0 ]; then rm -rf "${dirs[@]}"; else echo "with-rig.sh: the rigs' logs are kept in ${dirs[*]}" >&2; fi
}
trap stop EXIT
child=""
on_signal() { rc=$1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null && wait "$child"; exit "$rc"; }
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

for d in "${dirs[@]}"; do
  bash "$repo/scripts/rig.sh" up "$d" || { rc=1; echo "with-rig.sh: the rig in $d did not start" >&2; exit 1; }
done
dir=${dirs[0]}
# shellcheck disable=SC1091
source "$dir/env.sh"
export SKEIN_CONFIG=$dir/skein SUBM_SKEIN_HOME=$dir/skein-drivers SUBM_TEST_RIGS="${dirs[*]}"
# In the background, so that a TERM to this script reaches the command too; a background
# command would ignore SIGINT (bash's rule without job control), which tests of Ctrl-C need.
( trap - INT QUIT; exec "$@" ) &
child=$!
wait "$child"
rc=$?
exit "$rc"
