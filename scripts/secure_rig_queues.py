"""The secure rig's queue ACLs as `subm hadoop-conf` renders them for secure mode (scripts/with-secure-rig.sh).

usage: secure_rig_queues.py CAPACITY_SCHEDULER_XML ADMINS

The rig's capacity-scheduler.xml is Hadoop's shipped one, whose queue administrators are
everyone: any user could kill any job. Its ACL properties become ours (admins: ADMINS).
"""
import sys
import xml.etree.ElementTree as ET

from submarine_py.hadoopconf import render_hadoop_conf

path, admins = sys.argv[1], sys.argv[2]
ours = render_hadoop_conf({"kerberos_realm": "RIG.TEST", "yarn_admins": admins})["capacity-scheduler.xml"]
acls = {p.findtext("name"): p.findtext("value") for p in ET.fromstring(ours).iter("property")
        if "acl_administer" in (p.findtext("name") or "")}
tree = ET.parse(path)
have = {p.findtext("name"): p for p in tree.getroot().iter("property")}
for name, value in acls.items():
    if name in have:
        have[name].find("value").text = value
    else:
        prop = ET.SubElement(tree.getroot(), "property")
        ET.SubElement(prop, "name").text = name
        ET.SubElement(prop, "value").text = value
tree.write(path)
print(" ".join(f"{k}={v}" for k, v in acls.items()))
