#!/usr/bin/env bash
# Run a command against a Kerberized rig of the project's own (RIG_KERBEROS=1 scripts/rig.sh,
# 2 nodes), started for it and stopped after it, whatever happens (exit, failure, Ctrl-C,
# SIGTERM). What CI does around the secure tests (root):
#
#   SUBM_SECURE_LCE=1 bash scripts/with-secure-rig.sh bash scripts/test.sh -q -m secure
#
# The rig (scripts/rig/kerberos.sh, scripts/rig/secure_conf.py; ~40 s): an MIT KDC for realm
# RIG.TEST and Hadoop (3.4.2, RIG_HADOOP_VERSION) with Kerberized YARN and HDFS on rm.rig.test
# and nm1/nm2.rig.test (127.0.0.80-82), in a fresh folder under /tmp; keytabs of alice and bob in
# /tmp/krb and /etc/krb5.conf while it runs: one such rig per machine. Tickets last
# RIG_TICKET_LIFETIME (5m here); the RM renews the jobs' delegation tokens each
# RIG_TOKEN_RENEW_MS (120000) up to RIG_TOKEN_MAX_MS (300000): the long test sees a job outlive both.
# SUBM_SECURE_LCE=1: its NodeManagers then run the LinuxContainerExecutor (scripts/secure-lce.sh),
# so tasks run as the user who submitted; that needs Hadoop's setuid container-executor from
# SUBM_HADOOP_DIST (an unpacked Apache distribution): without one the rig keeps the default
# executor and the tests that need tasks to run as their users skip, saying so.
# RIG_HA=1, RIG_TLS=1: the production shape (two masters on 127.0.0.80 and .81, rm2.rig.test; the
# nodes on 127.0.0.82-83; HTTPS only), as scripts/rig.sh makes it.
# RIG_ISOLATED=1: its nodes are isolated as scripts/rig.sh makes them (keeping /tmp/krb's keytabs);
# alice and bob then run subm from a venv of submarine-py[yarn,kerberos] of their own (SUBM_SECURE_PYTHON),
# whose jobs take it along (untried with the LinuxContainerExecutor).
# The command gets the rig's env.sh (HADOOP_CONF_DIR, JAVA_HOME, SKEIN_DRIVER_JAVA_OPTIONS),
# its own skein config and drivers (SKEIN_CONFIG, SUBM_SKEIN_HOME), SUBM_SECURE_KEYTABS and
# SUBM_SECURE_LONG=1, and SUBM_SECURE_PYTHON: an interpreter alice and bob can run (Debian's python3
# with the packages of python3 on PATH, the project's venv under CI). The command's exit status
# is this script's.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -gt 0 ] || { echo "usage: with-secure-rig.sh CMD [ARG...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "with-secure-rig.sh: needs root (a KDC, users alice and bob)" >&2; exit 2; }

dir=$(mktemp -d /tmp/subm-secure-rig.XXXXXX)
rig=$dir/rig
stop() {
  trap - EXIT INT TERM
  local f pid
  while IFS= read -r f; do  # the skein drivers (JVMs) started for the command
    pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$f" 2>/dev/null) || continue
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
  done < <(find "$dir" -name driver -type f 2>/dev/null)
  bash "$repo/scripts/rig.sh" down "$rig"
  if [ "${rc:-1}" = 0 ]; then rm -rf "$dir"; else echo "with-secure-rig.sh: kept $dir; the rig's logs: $rig/logs, $rig/node*/logs" >&2; fi
}
trap stop EXIT
child=""
on_signal() { rc=$1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null && wait "$child"; exit "$rc"; }
trap 'on_signal 130' INT
trap 'on_signal 143' TERM

begun=$(date +%s)
# Isolated nodes (RIG_ISOLATED=1) hide /tmp: they keep the rig's keytabs (/tmp/krb) all the same.
[ "${RIG_ISOLATED:-}" = 1 ] && export RIG_KEEP="/tmp/krb${RIG_KEEP:+ $RIG_KEEP}"
# RIG_HA=1: master 2 on 127.0.0.81, the nodes on 127.0.0.82-83.
base=80
[ "${RIG_HA:-}" = 1 ] && base=81
RIG_KERBEROS=1 RIG_NODES=2 RIG_HOST=127.0.0.80 RIG_NODE_BASE=$base RIG_TICKET_LIFETIME=${RIG_TICKET_LIFETIME:-5m} \
  bash "$repo/scripts/rig.sh" up "$rig" 2>"$dir/up.log" \
  || { rc=1; cat "$dir/up.log" >&2; echo "with-secure-rig.sh: the secure rig did not start" >&2; exit 1; }
tail -1 "$dir/up.log" >&2
lce=""
if [ "${SUBM_SECURE_LCE:-}" = 1 ]; then  # tasks as their users (scripts/secure-lce.sh)
  if [ -x "${SUBM_HADOOP_DIST:-/nonexistent}/bin/container-executor" ]; then
    bash "$repo/scripts/secure-lce.sh" "$rig" >>"$dir/up.log" 2>&1 || { rc=1; cat "$dir/up.log" >&2; exit 1; }
    lce=" (LinuxContainerExecutor)"
  else
    echo "with-secure-rig.sh: SUBM_SECURE_LCE=1 needs Hadoop's container-executor, which only Apache's binary" \
      "tarballs carry (SUBM_HADOOP_DIST names none): the NodeManagers keep the default executor, and the tests" \
      "that need tasks to run as their users skip" >&2
  fi
fi
echo "with-secure-rig.sh: up after $(( $(date +%s) - begun )) s$lce" >&2
# An interpreter alice and bob may run (this one may live under /root): Debian's python3 with
# the packages of the one that runs the command (the same minor version), and this project.
# On isolated nodes their jobs take their environment along: then a venv of
# submarine-py[yarn,kerberos] of their own (Debian's python3, which the nodes have too), a user's few
# hundred MB, not this project's venv through a .pth file.
chmod 755 "$dir"
if [ "${RIG_ISOLATED:-}" = 1 ]; then
  /usr/bin/python3 -m venv "$dir/python"
  "$dir/python/bin/python" -m pip install -q --disable-pip-version-check "$repo[yarn,kerberos]" >>"$dir/up.log" 2>&1 \
    || { rc=1; tail -20 "$dir/up.log" >&2; echo "with-secure-rig.sh: cannot make the users' venv" >&2; exit 1; }
else
  # (Default: the project's .venv, where scripts/venv.sh made it: CI runs this before test.sh.)
  py=${SUBM_SECURE_PYTHON_FROM:-}
  [ -z "$py" ] && [ -x "$repo/.venv/bin/python" ] && py=$repo/.venv/bin/python
  py=${py:-$(command -v python3)}
  site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  /usr/bin/python3 -m venv --without-pip "$dir/python"
  printf '%s\nimport site; site.addsitedir(%s)\n' "$repo" "'$site'" \
    > "$("$dir/python/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/subm-secure.pth"
fi
chmod -R a+rX "$dir/python"
# shellcheck disable=SC1091
source "$rig/env.sh"
export SKEIN_CONFIG=$dir/skein SUBM_SKEIN_HOME=$dir/skein-drivers SUBM_SECURE_KEYTABS=/tmp/krb SUBM_SECURE_LONG=1 \
  SUBM_SECURE_PYTHON=$dir/python/bin/python
( trap - INT QUIT; exec "$@" ) &
child=$!
wait "$child"
rc=$?
exit "$rc"
