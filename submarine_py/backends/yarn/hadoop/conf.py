"""The cluster's Hadoop configuration: the folder HADOOP_CONF_DIR names and the properties of its
XML files (``yarn-site.xml``, ``core-site.xml``, ...), read by the REST client, the Kerberos login
and skein's driver alike."""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from typing import Dict, Optional

from ....errors import BackendError, SpecError


def hadoop_conf_dir() -> str:
    """HADOOP_CONF_DIR, checked: it names an existing folder holding yarn-site.xml."""
    conf_dir = os.environ.get("HADOOP_CONF_DIR") or ""
    if not conf_dir:
        raise SpecError([("HADOOP_CONF_DIR", "not set: the yarn backend talks to the cluster whose configuration "
                                             "it names (the folder with yarn-site.xml); set it, or run with "
                                             "--backend local")])
    if not os.path.isdir(conf_dir):
        raise SpecError([("HADOOP_CONF_DIR", f"{conf_dir} does not exist; point it at your cluster's Hadoop "
                                             "configuration (the folder with yarn-site.xml), or unset it to run "
                                             "locally")])
    if not os.path.isfile(os.path.join(conf_dir, "yarn-site.xml")):
        raise SpecError([("HADOOP_CONF_DIR", f"{conf_dir} has no yarn-site.xml; point it at your cluster's Hadoop "
                                             "configuration")])
    return os.path.realpath(conf_dir)


def hadoop_conf(name: str, conf_dir: Optional[str] = None) -> Dict[str, str]:
    """Properties of ``<conf_dir>/<name>`` (conf_dir: the checked HADOOP_CONF_DIR; empty when the file is absent)."""
    conf_dir = conf_dir or hadoop_conf_dir()
    path = os.path.join(conf_dir, name)
    if not os.path.isfile(path):
        return {}
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise BackendError(f"{path} is not valid XML: {exc}") from None
    out = {}
    for prop in root.iter("property"):
        key, value = prop.findtext("name"), prop.findtext("value")
        if key:
            out[key.strip()] = (value or "").strip()
    return expanded(out)


_VARIABLE = re.compile(r"\$\{([^${}]+)\}")


def expanded(props: Dict[str, str]) -> Dict[str, str]:
    """``${name}`` in values replaced as Hadoop's Configuration does: by another property of the
    file, or ``${env.NAME}`` by an environment variable (left as written where neither is set)."""

    def value(key: str, depth: int = 0) -> str:
        def one(m: "re.Match[str]") -> str:
            name = m.group(1)
            if name.startswith("env."):
                return os.environ.get(name[4:], m.group(0))
            if name in props and depth < 20:
                return value(name, depth + 1)
            return m.group(0)

        return _VARIABLE.sub(one, props[key])

    return {key: value(key) for key in props}
