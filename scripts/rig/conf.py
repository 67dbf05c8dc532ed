"""The rig's Hadoop configuration: one folder for the client, the ResourceManager and the
NameNode (RIG_DIR/conf), and one per node for its NodeManager and DataNode
(RIG_DIR/node<i>/conf). Run by scripts/rig.sh with its settings in the environment; standard
library only (it runs before any virtualenv exists).

    python3 conf.py RIG_DIR

What it sets up, as production clusters run: HDFS is the default filesystem (the NameNode on
RIG_HOST:8020, one DataNode per node); the ResourceManager keeps its state for a restart
(work-preserving recovery); the web endpoints take simple authentication (``user.name``); the
capacity scheduler counts GPUs (``yarn.io/gpu``, DominantResourceCalculator) in the queues of
RIG_QUEUES, with YARN's preemption monitor where RIG_PREEMPTION=1; with RIG_KERBEROS=1 every
daemon and web endpoint is Kerberized (scripts/rig/kerberos.sh makes the realm and keytabs).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Dict, List
from xml.sax.saxutils import escape

import secure_conf  # noqa: E402  (beside this file)

#: Every node's DataNode listens on its own address, but also on ports of its own: a DataNode's
#: registration carries the address its RPC came from (127.0.0.1 for all of them on loopback),
#: and the NameNode takes two DataNodes of one address and port for one node.
DN_PORTS = {"address": 9866, "http.address": 9864, "ipc.address": 9867}
REALM = "RIG.TEST"


def env(name: str, default: str = "") -> str:
    return os.environ.get(name) or default


def node_host(i: int) -> str:
    """Node i's address; with RIG_KERBEROS=1 its name, nm<i>.rig.test (principals name hosts)."""
    if secure_conf.enabled():
        return secure_conf.node_name(i)
    return f"127.0.0.{int(env('RIG_NODE_BASE', '40')) + i}"


def master_host() -> str:
    """The NameNode's and the ResourceManager's address: RIG_HOST, or rm.rig.test with Kerberos."""
    return secure_conf.MASTER if secure_conf.enabled() else env("RIG_HOST", "127.0.0.3")


def write_site(path: Path, props: Dict[str, str]) -> None:
    rows = "".join(f"  <property><name>{escape(k)}</name><value>{escape(str(v))}</value></property>\n"
                   for k, v in props.items())
    path.write_text(f'<?xml version="1.0"?>\n<configuration>\n{rows}</configuration>\n')


def core(rig: Path, i: int = 0) -> Dict[str, str]:
    host = master_host()
    props = {
        "fs.defaultFS": f"hdfs://{host}:8020",
        "hadoop.tmp.dir": str(rig / "tmp"),
        "hadoop.http.filter.initializers": "org.apache.hadoop.security.AuthenticationFilterInitializer",
        "hadoop.http.authentication.type": "simple",
        "hadoop.http.authentication.simple.anonymous.allowed": "true",
        "hadoop.http.authentication.signature.secret.file": str(rig / "http-secret"),
    }
    if secure_conf.enabled():
        props.update(secure_conf.core(node_host(i) if i else host))
    return props


def hdfs(rig: Path, i: int = 0) -> Dict[str, str]:
    """The NameNode's settings (i = 0) or node i's DataNode's."""
    host = master_host()
    nodes = int(env("RIG_NODES", "3"))
    props = {
        "dfs.namenode.rpc-address": f"{host}:8020",
        "dfs.namenode.http-address": f"{host}:9870",
        "dfs.namenode.name.dir": str(rig / "hdfs-name"),
        # Two copies where there are two nodes: a node that dies loses no staged file.
        "dfs.replication": str(min(2, nodes)),
        "dfs.namenode.safemode.extension": "0",
        "dfs.namenode.datanode.registration.ip-hostname-check": "false",
        # Clients (the NodeManagers' localizers, tasks, `hdfs dfs`) reach a DataNode by the
        # address it names itself with, not the 127.0.0.1 the NameNode saw.
        "dfs.client.use.datanode.hostname": "true",
        "dfs.datanode.use.datanode.hostname": "true",
        # A dead node's DataNode is noticed in about a minute (HDFS's default: 10.5 minutes).
        "dfs.heartbeat.interval": "3",
        "dfs.namenode.heartbeat.recheck-interval": "15000",
        "dfs.client.block.write.replace-datanode-on-failure.enable": "false",
        "dfs.namenode.fs-limits.min-block-size": "0",
        "dfs.webhdfs.enabled": "true",
    }
    if i:
        props["dfs.datanode.hostname"] = node_host(i)
        props["dfs.datanode.data.dir"] = str(rig / f"node{i}" / "hdfs-data")
        for key, port in DN_PORTS.items():
            props[f"dfs.datanode.{key}"] = f"{node_host(i)}:{port + 100 * i}"
    if secure_conf.enabled():
        props.update(secure_conf.hdfs(node_host(i) if i else host))
    return props


def yarn(rig: Path, i: int = 0) -> Dict[str, str]:
    """The ResourceManager's and the client's settings (i = 0) or node i's NodeManager's."""
    host = master_host()
    mem, vcores = env("RIG_MEM_MB", "16384"), env("RIG_VCORES", "16")
    props = {
        "yarn.resourcemanager.hostname": host,
        "yarn.scheduler.minimum-allocation-mb": "64",
        "yarn.scheduler.maximum-allocation-mb": mem,
        "yarn.scheduler.maximum-allocation-vcores": vcores,
        "yarn.nodemanager.vmem-check-enabled": "false",
        "yarn.nodemanager.pmem-check-enabled": "false",
        "yarn.nodemanager.resource.memory-mb": mem,
        "yarn.nodemanager.resource.cpu-vcores": vcores,
        "yarn.nodemanager.delete.debug-delay-sec": "3600",
        "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "99.5",
        "yarn.log-aggregation-enable": "false",
        "yarn.resourcemanager.max-completed-applications": "1000",
        "yarn.nm.liveness-monitor.expiry-interval-ms": env("RIG_NM_EXPIRY_MS", "600000"),
        # A ResourceManager restart keeps running applications.
        "yarn.resourcemanager.recovery.enabled": "true",
        "yarn.resourcemanager.work-preserving-recovery.enabled": "true",
        "yarn.resourcemanager.store.class":
            "org.apache.hadoop.yarn.server.resourcemanager.recovery.FileSystemRMStateStore",
        "yarn.resourcemanager.fs.state-store.uri": f"file://{rig}/rm-state",
        # What containers may inherit from their NodeManager, and the classpath skein's AM (a
        # JVM in a container) starts with: the rig's jars, not a distribution's share/hadoop.
        "yarn.nodemanager.env-whitelist": "JAVA_HOME,HADOOP_COMMON_HOME,HADOOP_HDFS_HOME,HADOOP_CONF_DIR,"
                                          "CLASSPATH_PREPEND_DISTCACHE,HADOOP_YARN_HOME,HADOOP_HOME,PATH,LANG,TZ",
        "yarn.application.classpath": "$HADOOP_CONF_DIR,$HADOOP_COMMON_HOME/lib/*",
    }
    if env("RIG_PREEMPTION") == "1":
        props.update({
            "yarn.resourcemanager.scheduler.monitor.enable": "true",
            "yarn.resourcemanager.scheduler.monitor.policies":
                "org.apache.hadoop.yarn.server.resourcemanager.monitor.capacity.ProportionalCapacityPreemptionPolicy",
            "yarn.resourcemanager.monitor.capacity.preemption.monitoring_interval": "1000",
            "yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill": "3000",
            "yarn.resourcemanager.monitor.capacity.preemption.total_preemption_per_round": "1.0",
            "yarn.resourcemanager.monitor.capacity.preemption.natural_termination_factor": "1.0",
            "yarn.resourcemanager.monitor.capacity.preemption.max_ignored_over_capacity": "0",
        })
    if i:
        node = rig / f"node{i}"
        props.update({
            "yarn.nodemanager.hostname": node_host(i),
            "yarn.nodemanager.local-dirs": str(node / "nm-local"),
            "yarn.nodemanager.log-dirs": str(node / "nm-logs"),
        })
    if secure_conf.enabled():
        props.update(secure_conf.yarn(node_host(i) if i else host))
    return props


def queues() -> Dict[str, str]:
    """The capacity scheduler: GPUs count (DominantResourceCalculator); RIG_QUEUES's leaf queues
    (``teama:50,teamb:50``), each free to grow to the whole cluster, else one queue, default."""
    spec = [q.split(":") for q in env("RIG_QUEUES", "default:100").split(",") if q]
    props = {
        "yarn.scheduler.capacity.resource-calculator": "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator",
        "yarn.scheduler.capacity.maximum-am-resource-percent": "0.5",
        "yarn.scheduler.capacity.maximum-applications": "10000",
        "yarn.scheduler.capacity.root.queues": ",".join(name for name, _ in spec),
    }
    for name, cap in spec:
        q = f"yarn.scheduler.capacity.root.{name}"
        props.update({
            f"{q}.capacity": cap,
            f"{q}.maximum-capacity": "100",
            f"{q}.user-limit-factor": str((100 + int(cap) - 1) // int(cap)),
            f"{q}.state": "RUNNING",
            f"{q}.acl_submit_applications": "*",
            f"{q}.acl_administer_queue": "*",
        })
    if secure_conf.enabled():
        props.update(secure_conf.queue_acls(name for name, _ in spec))
    return props


def hadoop_env(logs: Path) -> str:
    return (f"export HADOOP_LOG_DIR={logs}/logs\n"
            f"export HADOOP_PID_DIR={logs}/pids\n"
            + (secure_conf.hadoop_env() if secure_conf.enabled() else ""))


def write_conf(folder: Path, rig: Path, i: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_site(folder / "core-site.xml", core(rig, i))
    write_site(folder / "hdfs-site.xml", hdfs(rig, i))
    write_site(folder / "yarn-site.xml", yarn(rig, i))
    write_site(folder / "capacity-scheduler.xml", queues())
    write_site(folder / "resource-types.xml", {"yarn.resource-types": "yarn.io/gpu"})
    write_site(folder / "node-resources.xml", {"yarn.nodemanager.resource-type.yarn.io/gpu": env("RIG_GPUS", "4")})
    (folder / "log4j.properties").write_text(Path(__file__).with_name("log4j.properties").read_text())
    (folder / "hadoop-env.sh").write_text(hadoop_env(folder.parent))


def main(argv: List[str]) -> None:
    rig = Path(argv[1]).resolve()
    write_conf(rig / "conf", rig, 0)
    for i in range(1, int(env("RIG_NODES", "3")) + 1):
        write_conf(rig / f"node{i}" / "conf", rig, i)


if __name__ == "__main__":
    main(sys.argv)
