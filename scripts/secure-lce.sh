#!/usr/bin/env bash
# The NodeManagers of a Kerberized rig (RIG_KERBEROS=1 scripts/rig.sh up DIR) on the
# LinuxContainerExecutor, so that tasks run as the user who submitted (root; run once the rig is
# up; scripts/with-secure-rig.sh does with SUBM_SECURE_LCE=1):
#
#   SUBM_HADOOP_DIST=/opt/hadoop-3.4.2 bash scripts/secure-lce.sh DIR
#
#   - Hadoop's own setuid container-executor, which no registry publishes: taken from
#     SUBM_HADOOP_DIST, an unpacked Apache binary distribution of the rig's Hadoop version
#     (bin/container-executor), installed at /opt/subm-rig/krb-rig-lce/bin, root:hadoop 6050,
#     beside etc/hadoop/container-executor.cfg as `subm hadoop-conf --set kerberos_realm=RIG.TEST`
#     renders it (the binary reads the cfg relative to itself, and refuses a folder above it
#     that others may write); exit 3 without one;
#   - the LCE properties of the rendered yarn-site.xml on each NodeManager (no cgroups, no
#     Docker: this rig runs neither), then the nodes restarted (scripts/rig/node.sh).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
R=$(cd "${1:?usage: secure-lce.sh RIG_DIR}" && pwd)
ce=/opt/subm-rig/krb-rig-lce
python=${SUBM_SECURE_PYTHON_FROM:-}
[ -z "$python" ] && [ -x "$repo/.venv/bin/python" ] && python=$repo/.venv/bin/python
python=${python:-$(command -v python3)}
say() { echo "secure-lce.sh: $*" >&2; }
[ "$(id -u)" = 0 ] || { say "needs root (a setuid container-executor)"; exit 2; }
[ -f "$R/env.sh" ] && grep -q "RIG_KERBEROS=1" "$R/env.sh" || { say "no Kerberized rig in $R (RIG_KERBEROS=1 scripts/rig.sh up $R)"; exit 1; }
[ -x "${SUBM_HADOOP_DIST:-/nonexistent}/bin/container-executor" ] || {
  say "needs Hadoop's container-executor, which only Apache's binary tarballs carry: set SUBM_HADOOP_DIST to an unpacked distribution that has bin/container-executor"; exit 3; }

getent group hadoop >/dev/null || groupadd hadoop
install -d -m 755 -o root -g root /opt/subm-rig $ce $ce/bin $ce/etc $ce/etc/hadoop
cp "$SUBM_HADOOP_DIST/bin/container-executor" $ce/bin/
chown root:hadoop $ce/bin/container-executor && chmod 6050 $ce/bin/container-executor

# The users' containers run in nm-local (what an earlier executor left there is not theirs).
# shellcheck disable=SC1091
source "$R/env.sh"
for i in $(seq "$RIG_NODES"); do chmod 755 "$R" "$R/node$i" 2>/dev/null || true; rm -rf "$R/node$i/nm-local/usercache"; done
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
for i in range(1, int(os.environ["RIG_NODES"]) + 1):
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
for i in $(seq "$RIG_NODES"); do RIG_DIR=$R bash "$repo/scripts/rig/node.sh" stop "$i" >/dev/null 2>&1 || true; done
for i in $(seq "$RIG_NODES"); do RIG_DIR=$R bash "$repo/scripts/rig/node.sh" start "$i" >/dev/null 2>&1; done
n=0
for _ in $(seq 90); do
  n=$(KRB5CCNAME=FILE:$R/cc-lce bash -c "kinit -kt /tmp/krb/alice.keytab alice 2>/dev/null; curl -s --negotiate -u : http://rm.rig.test:8088/ws/v1/cluster/nodes" \
      | python3 -c "import json,sys; print(len([x for x in (json.load(sys.stdin)['nodes'] or {}).get('node',[]) if x['state']=='RUNNING']))" 2>/dev/null || echo 0)
  [ "$n" = "$RIG_NODES" ] && break; sleep 1
done
[ "$n" = "$RIG_NODES" ] || { say "the NodeManagers did not come back on the LinuxContainerExecutor ($n running; logs in $R/node*/logs)"; exit 1; }
say "NodeManagers on the LinuxContainerExecutor ($ce/bin/container-executor), $n RUNNING"
