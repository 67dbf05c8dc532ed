#!/usr/bin/env bash
# The Kerberized rig's NodeManagers (../shared/yarn-rig/secure: /tmp/krb-rig) on the
# LinuxContainerExecutor, so that tasks run as the user who submitted (root; run after
# secure/up.sh; scripts/with-secure-rig.sh does with SUBM_SECURE_LCE=1):
#   - Hadoop 3.1.2's own setuid container-executor (from the unpacked copy in
#     /opt/subm-rig/hadoop-3.1.2 that RIG_DOCKER=1 scripts/rig.sh keeps, else the rig's
#     tarball) at /opt/subm-rig/krb-rig-lce/bin, root:hadoop 6050, beside
#     etc/hadoop/container-executor.cfg as `subm hadoop-conf --set kerberos_realm=RIG.TEST`
#     renders it (the binary reads the cfg relative to itself, and refuses a folder above it
#     that others may write);
#   - the LCE properties of the rendered yarn-site.xml on each NodeManager (no cgroups, no
#     Docker: this rig runs neither), then the NodeManagers restarted.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
shared=${SUBM_YARN_RIG:-$repo/../shared/yarn-rig}
R=/tmp/krb-rig
ce=/opt/subm-rig/krb-rig-lce
python=${SUBM_SECURE_PYTHON_FROM:-$(command -v python3)}
say() { echo "secure-lce.sh: $*" >&2; }
[ "$(id -u)" = 0 ] || { say "needs root (a setuid container-executor)"; exit 2; }
[ -f $R/env.sh ] || { say "no secure rig in $R (../shared/yarn-rig/secure/up.sh)"; exit 1; }

getent group hadoop >/dev/null || groupadd hadoop
install -d -m 755 -o root -g root /opt/subm-rig $ce $ce/bin $ce/etc $ce/etc/hadoop
if [ -f /opt/subm-rig/hadoop-3.1.2/bin/container-executor ]; then
  cp /opt/subm-rig/hadoop-3.1.2/bin/container-executor $ce/bin/
else
  tar -C $ce/bin --strip-components=2 -xJf "$shared/hadoop-3.1.2-yarn.tar.xz" --wildcards '*/bin/container-executor'
fi
chown root:hadoop $ce/bin/container-executor && chmod 6050 $ce/bin/container-executor

# The users' containers run in nm-local (what an earlier executor left there is not theirs).
for i in 1 2; do chmod 755 $R $R/node$i 2>/dev/null || true; rm -rf $R/node$i/nm-local/usercache; done
# shellcheck disable=SC1091
source $R/env.sh
PYTHONPATH=$repo "$python" - "$R" "$ce" <<'PY'
import os, sys, xml.etree.ElementTree as ET
from submarine_py.hadoopconf import render_hadoop_conf

rig, ce = sys.argv[1], sys.argv[2]
files = render_hadoop_conf({"kerberos_realm": "RIG.TEST", "gpu_plugin": False, "container_executor_path":
                           f"{ce}/bin/container-executor", "container_executor_group": "hadoop",
                           "ro_mounts": [], "min_user_id": 1000})
with open(f"{ce}/etc/hadoop/container-executor.cfg", "w") as f:
    f.write(files["container-executor.cfg"])
ours = {p.findtext("name"): p.findtext("value") for p in ET.fromstring(files["yarn-site.xml"]).iter("property")}
keep = ("yarn.nodemanager.container-executor.class", "yarn.nodemanager.linux-container-executor.path",
        "yarn.nodemanager.linux-container-executor.group")
# The localizer is a JVM the LCE starts as the user: on Java 17 it needs the daemons' --add-exports.
ours["yarn.nodemanager.container-localizer.java.opts"] = "-Xmx256m " + os.environ.get("SKEIN_DRIVER_JAVA_OPTIONS", "")
keep += ("yarn.nodemanager.container-localizer.java.opts",)
for i in (1, 2):
    path = f"{rig}/node{i}/conf/yarn-site.xml"
    tree = ET.parse(path)
    have = {p.findtext("name"): p for p in tree.getroot().iter("property")}
    for key in keep:
        if key in have:
            have[key].find("value").text = ours[key]
        else:
            p = ET.SubElement(tree.getroot(), "property")
            ET.SubElement(p, "name").text = key
            ET.SubElement(p, "value").text = ours[key]
    tree.write(path)
PY
chmod 644 $ce/etc/hadoop/container-executor.cfg
out=$($ce/bin/container-executor --checksetup 2>&1) || { say "container-executor --checksetup failed: $out"; exit 1; }
for i in 1 2; do RIG_DIR=$R bash "$shared/node.sh" stop $i >/dev/null 2>&1 || true; done
for i in 1 2; do RIG_DIR=$R bash "$shared/node.sh" start $i >/dev/null 2>&1; done
n=0
for _ in $(seq 90); do
  n=$(KRB5CCNAME=/tmp/krb/cc-lce bash -c "kinit -kt /tmp/krb/alice.keytab alice 2>/dev/null; curl -s --negotiate -u : http://rm.rig.test:8088/ws/v1/cluster/nodes" \
      | python3 -c "import json,sys; print(len([x for x in (json.load(sys.stdin)['nodes'] or {}).get('node',[]) if x['state']=='RUNNING']))" 2>/dev/null || echo 0)
  [ "$n" = 2 ] && break; sleep 1
done
[ "$n" = 2 ] || { say "the NodeManagers did not come back on the LinuxContainerExecutor ($n running; logs in $R/node*/logs)"; exit 1; }
say "NodeManagers on the LinuxContainerExecutor ($ce/bin/container-executor), 2 RUNNING"
