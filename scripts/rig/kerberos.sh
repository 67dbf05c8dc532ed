#!/usr/bin/env bash
# The Kerberos of a rig started with RIG_KERBEROS=1 (root): scripts/rig.sh runs `up` once
# conf.py has written the configuration (scripts/rig/secure_conf.py: the Kerberos properties)
# and before any daemon starts, and `down` after they stopped.
#
#   bash scripts/rig/kerberos.sh up|down DIR
#
# up:   an MIT KDC (Debian's krb5-kdc, installed if missing) for realm RIG.TEST on RIG_HOST:8800;
#       /etc/hosts names the masters rm.rig.test (RIG_HOST) and node i nm<i>.rig.test
#       (127.0.0.RIG_NODE_BASE+i); /etc/krb5.conf is the realm's while the rig runs (the
#       machine's is put back at down); in /tmp/krb the daemons' keytabs (yarn.keytab: rm/, nm/;
#       hdfs.keytab: nn/, dn/; http.keytab: HTTP/ of each host, for SPNEGO) and those of the
#       users alice and bob (Unix users made if missing, each owning their keytab).
#       Tickets last RIG_TICKET_LIFETIME (1h; CI: 5m), renewable for a day.
#       Writes DIR/master-env.sh (a ticket of nn, HDFS's superuser, for scripts/rig/wait.py,
#       which then makes /user/alice and /user/bob theirs) and adds skein's driver's Java 17
#       options to DIR/env.sh. The rig's Hadoop and folder are made readable by alice and bob.
# down: stops the KDC, puts back /etc/krb5.conf and /etc/hosts, keeps the KDC's log in DIR/logs
#       and removes /tmp/krb.
# With RIG_HA=1 master 2 (RIG_MASTER2) is rm2.rig.test, with nn/, rm/ and HTTP/ principals of its
# own, and the JournalNode (master 1) jn/rm.rig.test (hdfs.keytab); ZooKeeper stays unauthenticated.
# One Kerberized rig per machine (fixed names, /tmp/krb, /etc/krb5.conf).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
action=${1:?usage: kerberos.sh up|down DIR}
dir=$(cd "${2:?usage: kerberos.sh up|down DIR}" && pwd)
K=/tmp/krb REALM=RIG.TEST MARK="# subm-rig kerberos"
saved=/var/tmp/subm-rig-krb5.conf.orig
say() { echo "kerberos.sh: $*" >&2; }
# shellcheck disable=SC1091
source "$dir/env.sh"
kdc_addr=$RIG_HOST:8800

hosts() {  # rewrite /etc/hosts in place (it may be a bind mount): ours out, then ARGS lines in
  local kept
  kept=$(grep -v "$MARK\$" /etc/hosts || true)
  { printf '%s\n' "$kept"; for line in "$@"; do printf '%s %s\n' "$line" "$MARK"; done; } >/etc/hosts.subm-rig
  cat /etc/hosts.subm-rig >/etc/hosts && rm -f /etc/hosts.subm-rig
}

down() {
  if [ -f $K/kdc.pid ]; then kill "$(cat $K/kdc.pid)" 2>/dev/null || true; fi
  mkdir -p "$dir/logs" && cp -f $K/kdc.log "$dir/logs/kdc.log" 2>/dev/null || true
  if [ -f $saved ]; then
    if [ -s $saved ]; then cat $saved >/etc/krb5.conf; else rm -f /etc/krb5.conf; fi
    rm -f $saved
  fi
  hosts
  rm -rf $K
}
if [ "$action" = down ]; then down; exit 0; fi
[ "$action" = up ] || { say "usage: kerberos.sh up|down DIR"; exit 2; }

if ! command -v krb5kdc >/dev/null || ! command -v kinit >/dev/null; then
  say "installing Debian's krb5-kdc, krb5-admin-server, krb5-user"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq krb5-kdc krb5-admin-server krb5-user >/dev/null
fi
master=rm.rig.test
masters=("$master")
[ "${RIG_HA:-}" = 1 ] && masters+=(rm2.rig.test)
nodes=()
for i in $(seq "$RIG_NODES"); do nodes+=("nm$i.rig.test"); done
lines=("$RIG_HOST $master")
[ "${RIG_HA:-}" = 1 ] && lines+=("$RIG_MASTER2 rm2.rig.test")
for i in $(seq "$RIG_NODES"); do lines+=("127.0.0.$((RIG_NODE_BASE + i)) nm$i.rig.test"); done
hosts "${lines[@]}"

# A KDC of a rig that was not taken down goes first.
if [ -f $K/kdc.pid ]; then kill "$(cat $K/kdc.pid)" 2>/dev/null || true; sleep 0.5; fi
rm -rf $K && mkdir -p $K/db && chmod 755 $K
lifetime=${RIG_TICKET_LIFETIME:-1h}
cat >$K/krb5.conf <<KRB
# The realm of the project's Kerberized rig (scripts/rig/kerberos.sh); the machine's own
# krb5.conf comes back when the rig goes down.
[libdefaults]
  default_realm = $REALM
  dns_lookup_realm = false
  dns_lookup_kdc = false
  rdns = false
  udp_preference_limit = 1
  ticket_lifetime = $lifetime
  renew_lifetime = 1d
[realms]
  $REALM = {
    kdc = $kdc_addr
  }
[domain_realm]
  .rig.test = $REALM
  rig.test = $REALM
KRB
cat >$K/kdc.conf <<KDC
[kdcdefaults]
  kdc_listen = $kdc_addr
  kdc_tcp_listen = $kdc_addr
[realms]
  $REALM = {
    database_name = $K/db/principal
    key_stash_file = $K/db/stash
    acl_file = $K/kadm5.acl
    max_life = $lifetime
    max_renewable_life = 1d
    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  }
[logging]
  kdc = FILE:$K/kdc.log
KDC
touch $K/kadm5.acl
chmod 644 $K/krb5.conf
# Java and MIT's tools read /etc/krb5.conf: the machine's own is kept aside (empty: there was none).
if ! [ -f $saved ]; then
  if [ -f /etc/krb5.conf ]; then cp /etc/krb5.conf $saved; else : >$saved; fi
fi
cat $K/krb5.conf >/etc/krb5.conf
export KRB5_KDC_PROFILE=$K/kdc.conf
kdb5_util create -s -r $REALM -P rig-master-pw >/dev/null 2>&1
kl() { kadmin.local -r $REALM -q "$1" >/dev/null 2>&1 || { say "kadmin.local: $1 failed"; exit 1; }; }
principals() {  # SERVICE HOST...
  local s=$1 h; shift
  for h in "$@"; do echo "$s/$h"; done
}
jn=()
[ "${RIG_HA:-}" = 1 ] && jn=("jn/$master")
for p in $(principals rm "${masters[@]}") $(principals nn "${masters[@]}") $(principals HTTP "${masters[@]}" "${nodes[@]}") \
         $(principals nm "${nodes[@]}") $(principals dn "${nodes[@]}") "${jn[@]}"; do
  kl "addprinc -randkey $p"
done
keytab() {  # FILE PRINCIPAL...: one ktadd each (ktadd takes one principal)
  local f=$1 p; shift
  for p in "$@"; do kl "ktadd -k $f $p"; done
}
# shellcheck disable=SC2046
keytab $K/yarn.keytab $(principals rm "${masters[@]}") $(principals nm "${nodes[@]}")
# shellcheck disable=SC2046
keytab $K/hdfs.keytab $(principals nn "${masters[@]}") $(principals dn "${nodes[@]}") "${jn[@]}"
# shellcheck disable=SC2046
keytab $K/http.keytab $(principals HTTP "${masters[@]}" "${nodes[@]}")
for u in alice bob; do
  id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u"
  kl "addprinc -pw ${u}pw $u"
  kl "ktadd -norandkey -k $K/$u.keytab $u"
  chown "$u" $K/$u.keytab
done
setsid krb5kdc -n -P $K/kdc.pid >$K/kdc.out 2>&1 </dev/null &
# Up when it gives nn, HDFS's superuser, a ticket: for wait.py (SPNEGO), which makes the users' homes.
export KRB5CCNAME=FILE:$dir/cc-rig
for _ in $(seq 50); do kinit -kt $K/hdfs.keytab "nn/$master" 2>/dev/null && break; sleep 0.2; done
klist -s || { cat $K/kdc.out >&2; say "the KDC on $kdc_addr gives no ticket"; exit 1; }
cat >"$dir/master-env.sh" <<ENV
export KRB5CCNAME=$KRB5CCNAME RIG_HDFS_HOMES="alice bob"
ENV
cat >>"$dir/env.sh" <<ENV
export SKEIN_DRIVER_JAVA_OPTIONS="$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import secure_conf; print(secure_conf.JAVA_OPENS)' "$here")"
ENV
# alice and bob run the rig's commands and skein's driver with its configuration and Hadoop:
# a Hadoop under a home others cannot enter is linked into /opt/subm-rig for them.
if ! runuser -u alice -- test -r "$HADOOP_HOME/bin/hadoop"; then
  shared=/opt/subm-rig/$(basename "$HADOOP_HOME")
  install -d -m 755 /opt/subm-rig
  rm -rf "$shared.tmp" && { cp -al "$HADOOP_HOME" "$shared.tmp" 2>/dev/null || cp -a "$HADOOP_HOME" "$shared.tmp"; }
  rm -rf "$shared" && mv "$shared.tmp" "$shared" && chmod -R a+rX "$shared"
  printf 'export HADOOP_HOME=%s PATH=%s/bin:$PATH\n' "$shared" "$shared" >>"$dir/env.sh"
fi
chmod 755 "$dir"
chmod -R a+rX "$dir/conf" "$dir/env.sh"
say "KDC for $REALM on $kdc_addr (tickets: $lifetime), keytabs in $K"
