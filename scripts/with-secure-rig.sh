#!/usr/bin/env bash
# Run a command against the Kerberized YARN of ../shared/yarn-rig/secure, started for it and
# stopped after it, whatever happens (exit, failure, Ctrl-C, SIGTERM). What CI does around the
# secure tests (root):
#
#   bash scripts/with-secure-rig.sh bash scripts/test.sh -q -m secure
#
# The rig (secure/up.sh, ~40 s): an MIT KDC for realm RIG.TEST and a 2-node Hadoop 3.1.2 on
# rm.rig.test and nm1/nm2.rig.test (127.0.0.80-82), its folders /tmp/krb (keytabs of alice and
# bob) and /tmp/krb-rig, and /etc/krb5.conf while it runs: one such rig per machine. Tickets
# last RIG_TICKET_LIFETIME (5m here), the RM's delegation tokens are renewed each
# RIG_TOKEN_RENEW_MS (120000) up to RIG_TOKEN_MAX_MS (300000): the long test sees a job outlive both.
# SUBM_SECURE_LCE=1: its NodeManagers then run the LinuxContainerExecutor (scripts/secure-lce.sh),
# so tasks run as the user who submitted.
# The command gets the rig's env.sh (HADOOP_CONF_DIR, JAVA_HOME, SKEIN_DRIVER_JAVA_OPTIONS),
# its own skein config and drivers (SKEIN_CONFIG, SUBM_SKEIN_HOME), SUBM_SECURE_KEYTABS and
# SUBM_SECURE_LONG=1, and SUBM_SECURE_PYTHON: an interpreter alice and bob can run (Debian's python3
# with the packages of python3 on PATH, the project's venv under CI). The command's exit status
# is this script's.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
shared=${SUBM_YARN_RIG:-$repo/../shared/yarn-rig}
[ $# -gt 0 ] || { echo "usage: with-secure-rig.sh CMD [ARG...]" >&2; exit 2; }
[ -x "$shared/secure/up.sh" ] || { echo "with-secure-rig.sh: no $shared/secure/up.sh (set SUBM_YARN_RIG)" >&2; exit 1; }

dir=$(mktemp -d /tmp/subm-secure-rig.XXXXXX)
stop() {
  trap - EXIT INT TERM
  local f pid
  while IFS= read -r f; do  # the skein drivers (JVMs) started for the command
    pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$f" 2>/dev/null) || continue
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
  done < <(find "$dir" -name driver -type f 2>/dev/null)
  bash "$shared/secure/down.sh"
  if [ "${rc:-1}" = 0 ]; then rm -rf "$dir"; else echo "with-secure-rig.sh: kept $dir; the rig's logs: /tmp/krb-rig/logs, /tmp/krb" >&2; fi
}
trap stop EXIT
child=""
on_signal() { rc=$1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null && wait "$child"; exit "$rc"; }
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

begun=$(date +%s)
# Twice at most: up.sh restarts the NodeManagers it has just stopped, and one may still hold its
# port then (seen: "Problem binding to [nm1.rig.test:8040] ... Address already in use").
for try in 1 2; do
  RIG_TICKET_LIFETIME=${RIG_TICKET_LIFETIME:-5m} bash "$shared/secure/up.sh" >"$dir/up.log" 2>&1 \
    || { rc=1; cat "$dir/up.log" >&2; echo "with-secure-rig.sh: the secure rig did not start" >&2; exit 1; }
  tail -1 "$dir/up.log" >&2
  grep -q "2 node(s) RUNNING" "$dir/up.log" && break
  [ "$try" = 2 ] && { rc=1; echo "with-secure-rig.sh: its NodeManagers are not RUNNING" >&2; exit 1; }
  bash "$shared/secure/down.sh"; sleep 5
done
# Short delegation-token lifetimes, so that a test job outlives its RM delegation token
# (issue 23): the RM renews an application's tokens each RIG_TOKEN_RENEW_MS (default 2 min)
# until RIG_TOKEN_MAX_MS after they were issued (5 min); then they are refused. up.sh writes the
# RM's yarn-site.xml and starts it: set them there, then restart the RM (no job runs yet; the
# NodeManagers register again with it).
( source /tmp/krb-rig/env.sh
  python3 "$repo/scripts/secure_rig_conf.py" set /tmp/krb-rig/conf/yarn-site.xml \
    "yarn.resourcemanager.delegation.token.renew-interval=${RIG_TOKEN_RENEW_MS:-120000}" \
    "yarn.resourcemanager.delegation.token.max-lifetime=${RIG_TOKEN_MAX_MS:-300000}"
  export YARN_RESOURCEMANAGER_USER=root
  yarn --daemon stop resourcemanager && yarn --daemon start resourcemanager
  export KRB5CCNAME=FILE:$dir/cc-nodes
  kinit -kt /tmp/krb/alice.keytab alice
  for _ in $(seq 90); do
    n=$(curl -s --negotiate -u : http://rm.rig.test:8088/ws/v1/cluster/nodes | python3 -c \
        "import json,sys; print(len([x for x in (json.load(sys.stdin)['nodes'] or {}).get('node',[]) if x['state']=='RUNNING']))" 2>/dev/null)
    [ "$n" = 2 ] && exit 0; sleep 1
  done
  echo "the NodeManagers did not register again after the RM's restart"; exit 1 ) >>"$dir/up.log" 2>&1 \
  || { rc=1; cat "$dir/up.log" >&2; echo "with-secure-rig.sh: could not shorten the delegation tokens' lifetimes" >&2; exit 1; }
# Queue administrators may kill any job: Hadoop's shipped capacity-scheduler.xml makes that
# everyone. Ours (subm hadoop-conf, secure mode) makes it YARN's admins (root on the rig).
( source /tmp/krb-rig/env.sh
  PYTHONPATH=$repo "${SUBM_SECURE_PYTHON_FROM:-$(command -v python3)}" "$repo/scripts/secure_rig_conf.py" queues \
    /tmp/krb-rig/conf/capacity-scheduler.xml root
  export KRB5CCNAME=FILE:$dir/cc-admin
  kinit -kt /tmp/krb/yarn.keytab rm/rm.rig.test && yarn rmadmin -refreshQueues ) >>"$dir/up.log" 2>&1 \
  || { rc=1; cat "$dir/up.log" >&2; echo "with-secure-rig.sh: could not set the queues' ACLs" >&2; exit 1; }
if [ "${SUBM_SECURE_LCE:-}" = 1 ]; then  # tasks as their users (scripts/secure-lce.sh)
  bash "$repo/scripts/secure-lce.sh" >>"$dir/up.log" 2>&1 || { rc=1; cat "$dir/up.log" >&2; exit 1; }
fi
echo "with-secure-rig.sh: up after $(( $(date +%s) - begun )) s${SUBM_SECURE_LCE:+ (LinuxContainerExecutor)}" >&2
# An interpreter alice and bob may run (this one may live under /root): Debian's python3 with
# the packages of the one that runs the command (the same minor version), and this project.
chmod 755 "$dir"
# (Default: the project's .venv, where scripts/venv.sh made it: CI runs this before test.sh.)
py=${SUBM_SECURE_PYTHON_FROM:-}
[ -z "$py" ] && [ -x "$repo/.venv/bin/python" ] && py=$repo/.venv/bin/python
py=${py:-$(command -v python3)}
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
/usr/bin/python3 -m venv --without-pip "$dir/python"
printf '%s\nimport site; site.addsitedir(%s)\n' "$repo" "'$site'" \
  > "$("$dir/python/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/subm-secure.pth"
chmod -R a+rX "$dir/python"
# shellcheck disable=SC1091
source /tmp/krb-rig/env.sh
export SKEIN_CONFIG=$dir/skein SUBM_SKEIN_HOME=$dir/skein-drivers SUBM_SECURE_KEYTABS=/tmp/krb SUBM_SECURE_LONG=1 \
  SUBM_SECURE_PYTHON=$dir/python/bin/python
( trap - INT QUIT; exec "$@" ) &
child=$!
wait "$child"
rc=$?
exit "$rc"
