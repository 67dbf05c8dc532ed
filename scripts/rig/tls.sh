#!/usr/bin/env bash
# The TLS of a rig started with RIG_TLS=1: scripts/rig.sh runs it before conf.py, which copies
# the stores into every conf folder beside ssl-server.xml and ssl-client.xml.
#
#   bash scripts/rig/tls.sh DIR      (RIG_HOST, RIG_MASTER2, RIG_NODE_BASE, RIG_NODES, RIG_HA,
#                                     RIG_KERBEROS in the environment, as rig.sh sets them)
#
# Writes DIR/tls/: ca.key, ca.pem (the rig's CA, Debian's openssl), server.pem and server.key
# (ONE certificate for every daemon, signed by that CA, its subjectAltNames every address and
# name of the rig: master 1, master 2 with RIG_HA=1, every node, localhost, 127.0.0.1, this
# machine's name, and rm.rig.test, rm2.rig.test, nm<i>.rig.test with RIG_KERBEROS=1; each address
# also as a DNS name, which Hadoop's hostname verifier compares), keystore.p12 (PKCS12: the key,
# its certificate and the CA) and truststore.jks (JKS: the CA), both of password rigpass, made
# with keytool, and bundle.pem (the rig's CA and the machine's, /etc/ssl/certs/ca-certificates.crt)
# for REQUESTS_CA_BUNDLE, SSL_CERT_FILE and CURL_CA_BUNDLE (env.sh).
set -euo pipefail
dir=$(cd "${1:?usage: tls.sh DIR}" && pwd)
t=$dir/tls pw=rigpass
say() { echo "tls.sh: $*" >&2; }
command -v openssl >/dev/null || { say "openssl is needed: apt-get install openssl"; exit 1; }
keytool=keytool
[ -x "${JAVA_HOME:-/nonexistent}/bin/keytool" ] && keytool=$JAVA_HOME/bin/keytool
command -v "$keytool" >/dev/null || { say "keytool (a JDK's) is needed: apt-get install openjdk-17-jdk-headless"; exit 1; }

ips=("${RIG_HOST:?}" 127.0.0.1)
[ "${RIG_HA:-}" = 1 ] && ips+=("${RIG_MASTER2:?}")
for i in $(seq "${RIG_NODES:?}"); do ips+=("127.0.0.$((RIG_NODE_BASE + i))"); done
names=(localhost "$(hostname)")
if [ "${RIG_KERBEROS:-}" = 1 ]; then
  names+=(rm.rig.test rm2.rig.test)
  for i in $(seq "$RIG_NODES"); do names+=("nm$i.rig.test"); done
fi
san=""
for n in "${names[@]}" "${ips[@]}"; do san+="DNS:$n,"; done
for a in "${ips[@]}"; do san+="IP:$a,"; done
san=${san%,}

rm -rf "$t" && mkdir -p "$t"
openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 30 -subj "/O=subm-rig/CN=subm-rig CA" \
  -keyout "$t/ca.key" -out "$t/ca.pem" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -sha256 -subj "/O=subm-rig/CN=$RIG_HOST" \
  -keyout "$t/server.key" -out "$t/server.csr" 2>/dev/null
cat >"$t/server.ext" <<EXT
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san
EXT
openssl x509 -req -sha256 -days 30 -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial \
  -extfile "$t/server.ext" -out "$t/server.pem" 2>/dev/null
openssl pkcs12 -export -in "$t/server.pem" -inkey "$t/server.key" -certfile "$t/ca.pem" -name rig \
  -passout "pass:$pw" -out "$t/server.openssl.p12"
"$keytool" -importkeystore -noprompt -srckeystore "$t/server.openssl.p12" -srcstoretype PKCS12 -srcstorepass "$pw" \
  -destkeystore "$t/keystore.p12" -deststoretype PKCS12 -deststorepass "$pw" -destkeypass "$pw" >/dev/null 2>&1
"$keytool" -importcert -noprompt -alias subm-rig-ca -file "$t/ca.pem" \
  -keystore "$t/truststore.jks" -storetype JKS -storepass "$pw" >/dev/null 2>&1
rm -f "$t/server.openssl.p12" "$t/server.csr"
cat "$t/ca.pem" /etc/ssl/certs/ca-certificates.crt >"$t/bundle.pem" 2>/dev/null || cp "$t/ca.pem" "$t/bundle.pem"
chmod 755 "$t" && chmod 644 "$t"/*.pem "$t"/*.p12 "$t"/*.jks && chmod 600 "$t/ca.key" "$t/server.key"
say "CA $t/ca.pem; one server certificate for ${san//,/ }"
