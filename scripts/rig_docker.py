"""The Docker mode of scripts/rig.sh: the NodeManagers run with the files `subm hadoop-conf`
renders, as an admin would install them (see hadoop-conf/README.md).

    python scripts/rig_docker.py RIG_DIR HADOOP_HOME USER PYTHON_DIR

For the Docker mode of rig.sh (RIG_DOCKER=1), which needs Hadoop's setuid container-executor
from an unpacked Apache distribution and is not yet carried over to the rig built from Maven
Central: run as root before the daemons start. For every node it renders our four files with this rig's
values (render_hadoop_conf, the function behind `subm hadoop-conf`) and installs them:

* yarn-site.xml: ours, plus the rig's own properties of things our file does not cover
  (addresses, ports, the viewfs mounts, its scheduler minimum), never one of the rig's
  LinuxContainerExecutor, Docker, cgroup or GPU settings: if the rig needed one that our
  file lacks, the NodeManager would not start or no Docker container would run, and the fault
  is in our templates;
* resource-types.xml and capacity-scheduler.xml: ours;
* container-executor.cfg: ours, at ``$HADOOP_HOME/etc/hadoop/`` (where the setuid binary
  reads it), replacing the rig's.

It writes ``RIG_DIR/docker-rig.json``, which the docker_yarn tests read: the user jobs are
submitted as, the Python that user runs, the image and the mounts jobs may use.
"""
from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET
from typing import Dict, List

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from submarine_py.hadoopconf import render_hadoop_conf  # noqa: E402

#: Properties that only our rendered yarn-site.xml may set: how containers are launched.
OURS_ONLY = ("yarn.nodemanager.container-executor.", "yarn.nodemanager.linux-container-executor.",
             "yarn.nodemanager.runtime.", "yarn.nodemanager.resource-plugins")
IMAGE = "localhost/subm-test:bookworm"


def props(path: str) -> Dict[str, str]:
    root = ET.parse(path).getroot()
    return {p.findtext("name") or "": p.findtext("value") or "" for p in root.findall("property")}


def write_props(path: str, values: Dict[str, str], header: str) -> None:
    root = ET.Element("configuration")
    root.append(ET.Comment(header))
    for name, value in values.items():
        prop = ET.SubElement(root, "property")
        ET.SubElement(prop, "name").text = name
        ET.SubElement(prop, "value").text = value
    ET.indent(root)
    ET.ElementTree(root).write(path, xml_declaration=True, encoding="utf-8")


def merge_yarn_site(ours_text: str, rigs_path: str) -> Dict[str, str]:
    """Our yarn-site.xml's properties, then the rig's that ours lacks and may lack."""
    ours = {p.findtext("name") or "": p.findtext("value") or ""
            for p in ET.fromstring(ours_text.encode()).findall("property")}
    merged = dict(ours)
    for name, value in props(rigs_path).items():
        if name not in ours and not name.startswith(OURS_ONLY):
            merged[name] = value
    return merged


def main(rig_dir: str, hadoop_home: str, user: str, python_dir: str) -> None:
    env = _env_sh(os.path.join(rig_dir, "env.sh"))
    nodes = int(env.get("RIG_NODES", "1"))
    node_dirs = [rig_dir] if nodes == 1 else [os.path.join(rig_dir, f"node{i}") for i in range(1, nodes + 1)]
    prefix = env["RIG_CGROUP_HIER_PREFIX"]
    site_packages = _site_packages(python_dir)
    ro_mounts = ["/etc/passwd", "/etc/group", "/sys/fs/cgroup", python_dir, *site_packages]
    every_node_dir = [os.path.join(d, sub) for d in node_dirs for sub in ("nm-local", "nm-logs")]
    rig_conf = props(os.path.join(rig_dir, "conf", "yarn-site.xml"))
    cgroups = any(k.startswith("yarn.nodemanager.linux-container-executor.resources-handler") for k in rig_conf)
    rendered = {}
    for i, node_dir in enumerate(node_dirs, start=1):
        values = {
            "resourcemanager_hostname": rig_conf["yarn.resourcemanager.hostname"],
            "memory_mb": rig_conf["yarn.nodemanager.resource.memory-mb"],
            "vcores": rig_conf["yarn.nodemanager.resource.cpu-vcores"],
            "nm_local_dirs": [os.path.join(node_dir, "nm-local")],
            "nm_log_dirs": [os.path.join(node_dir, "nm-logs")],
            # One container-executor.cfg serves every NodeManager of this machine.
            "rw_mounts": [os.path.join(rig_dir, "fs"), *every_node_dir],
            "ro_mounts": ro_mounts,
            "trusted_registries": ["localhost", "local"],
            "docker_networks": ["host"],
            "docker_default_network": "host",
            "gpu_plugin": False,
            "container_executor_path": os.path.join(hadoop_home, "bin", "container-executor"),
            "container_executor_group": "hadoop",
            "cgroups_hierarchy": f"{prefix}-node{i}",
        }
        files = render_hadoop_conf(values)
        if not cgroups:  # no cgroup v1 cpu controller here: the rig said so, keep the NM startable
            files["yarn-site.xml"] = _without_cgroups(files["yarn-site.xml"])
        out = os.path.join(rig_dir, "subm-conf", f"node{i}")
        os.makedirs(out, exist_ok=True)
        for name, text in files.items():
            with open(os.path.join(out, name), "w", encoding="utf-8") as f:
                f.write(text)
        rendered[i] = files
        conf = os.path.join(node_dir, "conf") if nodes > 1 else os.path.join(rig_dir, "conf")
        _install(conf, files, out)
    if nodes > 1:  # the ResourceManager's and the clients' conf: node 1's settings, as up.sh does
        _install(os.path.join(rig_dir, "conf"), rendered[1], os.path.join(rig_dir, "subm-conf", "node1"))
    cfg = os.path.join(hadoop_home, "etc", "hadoop", "container-executor.cfg")
    tmp = cfg + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(rendered[1]["container-executor.cfg"])
    os.chown(tmp, 0, 0)
    os.chmod(tmp, 0o644)
    os.replace(tmp, cfg)
    with open(os.path.join(rig_dir, "docker-rig.json"), "w", encoding="utf-8") as f:
        json.dump({"rig_dir": rig_dir, "conf_dir": os.path.join(rig_dir, "conf"), "nodes": nodes,
                   "hadoop_home": hadoop_home, "java_home": env.get("JAVA_HOME", ""), "user": user,
                   "python": os.path.join(python_dir, "bin", "python"), "image": IMAGE,
                   "mounts": [f"{p}:{p}:ro" for p in [python_dir, *site_packages]],
                   "node_dirs": node_dirs, "container_executor_cfg": cfg}, f, indent=2)


def _install(conf: str, files: Dict[str, str], rendered_dir: str) -> None:
    site = os.path.join(conf, "yarn-site.xml")
    merged = merge_yarn_site(files["yarn-site.xml"], site)
    write_props(site, merged, f" {rendered_dir}/yarn-site.xml (subm hadoop-conf) with this rig's addresses ")
    for name in ("resource-types.xml", "capacity-scheduler.xml"):
        with open(os.path.join(conf, name), "w", encoding="utf-8") as f:
            f.write(files[name])
    for name in os.listdir(conf):
        os.chmod(os.path.join(conf, name), 0o644)


def _without_cgroups(text: str) -> str:
    root = ET.fromstring(text.encode())
    for p in list(root.findall("property")):
        if (p.findtext("name") or "").startswith("yarn.nodemanager.linux-container-executor.cgroups.") or \
                p.findtext("name") == "yarn.nodemanager.linux-container-executor.resources-handler.class":
            root.remove(p)
    return ET.tostring(root, encoding="unicode")


def _site_packages(python_dir: str) -> List[str]:
    """The folders the user's venv adds with site.addsitedir (its subm-rig.pth), to mount too."""
    out: List[str] = []
    lib = os.path.join(python_dir, "lib")
    for version in sorted(os.listdir(lib)):
        pth = os.path.join(lib, version, "site-packages", "subm-rig.pth")
        if os.path.isfile(pth):
            with open(pth, encoding="utf-8") as f:
                for line in f:
                    if "addsitedir(" in line:
                        out.append(line.split("addsitedir(", 1)[1].rsplit(")", 1)[0].strip("'\""))
    return out


def _env_sh(path: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("export "):
                for word in line[len("export "):].split():
                    if "=" in word:
                        key, value = word.split("=", 1)
                        out[key] = value
    return out


if __name__ == "__main__":
    main(*sys.argv[1:5])
