"""Changes to the secure rig's Hadoop files (scripts/with-secure-rig.sh).

usage: secure_rig_conf.py queues CAPACITY_SCHEDULER_XML ADMINS
       secure_rig_conf.py set SITE_XML NAME=VALUE...

queues: the rig's capacity-scheduler.xml is Hadoop's shipped one, whose queue administrators are
everyone: any user could kill any job. Its ACL properties become those `subm hadoop-conf`
renders for secure mode (admins: ADMINS); needs this project on PYTHONPATH.
set: each NAME gets VALUE in the file (added where it is missing).
"""
import sys
import xml.etree.ElementTree as ET


def set_properties(path, values):
    tree = ET.parse(path)
    have = {p.findtext("name"): p for p in tree.getroot().iter("property")}
    for name, value in values.items():
        if name in have:
            have[name].find("value").text = value
        else:
            prop = ET.SubElement(tree.getroot(), "property")
            ET.SubElement(prop, "name").text = name
            ET.SubElement(prop, "value").text = value
    tree.write(path)


def queue_acls(admins):
    from submarine_py.hadoopconf import render_hadoop_conf

    ours = render_hadoop_conf({"kerberos_realm": "RIG.TEST", "yarn_admins": admins})["capacity-scheduler.xml"]
    return {p.findtext("name"): p.findtext("value") for p in ET.fromstring(ours).iter("property")
            if "acl_administer" in (p.findtext("name") or "")}


if __name__ == "__main__":
    mode, path, rest = sys.argv[1], sys.argv[2], sys.argv[3:]
    values = queue_acls(rest[0]) if mode == "queues" else dict(arg.split("=", 1) for arg in rest)
    set_properties(path, values)
    print(" ".join(f"{k}={v}" for k, v in values.items()))
