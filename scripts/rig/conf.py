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

With RIG_HA=1 the production shape of the masters: NameNodes nn1 and nn2 of nameservice
``rigns`` (one JournalNode, a ZKFC each) and ResourceManagers rm1 and rm2 (ZKRMStateStore,
embedded failover), their election in one standalone ZooKeeper; master 1 on RIG_HOST, master 2
on RIG_MASTER2 (rig.sh: 127.0.0.RIG_NODE_BASE), each with its own folder (RIG_DIR/master<m>:
conf, logs, pids, name directory), while RIG_DIR/conf is the client's (both masters listed) and
that of the ZooKeeper and the JournalNode. With RIG_TLS=1 every web endpoint is HTTPS only,
with the keystores scripts/rig/tls.sh makes (copied into each conf folder with ssl-server.xml
and ssl-client.xml).
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
DN_HTTPS_PORT = 9865
REALM = "RIG.TEST"
NAMESERVICE = "rigns"
#: The masters' ports (each master on an address of its own, so both use the same ones).
NN_RPC, NN_HTTP, NN_HTTPS, ZKFC = 8020, 9870, 9871, 8019
RM_PORTS = {"scheduler.address": 8030, "resource-tracker.address": 8031, "address": 8032,
            "admin.address": 8033, "webapp.address": 8088, "webapp.https.address": 8090}
JN_RPC, JN_HTTP, JN_HTTPS, ZK = 8485, 8480, 8481, 2181
NM_HTTPS = 8044
#: The password of the rig's keystore and truststore (tls.sh).
TLS_PASSWORD = "rigpass"
#: How fast a dead master's place is taken (ZooKeeper sessions; tickTime 1000 allows 2-60 s).
ZK_SESSION_MS = "4000"


def env(name: str, default: str = "") -> str:
    return os.environ.get(name) or default


def ha() -> bool:
    return env("RIG_HA") == "1"


def tls() -> bool:
    return env("RIG_TLS") == "1"


def node_host(i: int) -> str:
    """Node i's address; with RIG_KERBEROS=1 its name, nm<i>.rig.test (principals name hosts)."""
    if secure_conf.enabled():
        return secure_conf.node_name(i)
    return f"127.0.0.{int(env('RIG_NODE_BASE', '40')) + i}"


def master_address(m: int = 1) -> str:
    """Master m's address: RIG_HOST (1), RIG_MASTER2 or 127.0.0.RIG_NODE_BASE (2)."""
    if m == 2:
        return env("RIG_MASTER2") or f"127.0.0.{int(env('RIG_NODE_BASE', '40'))}"
    return env("RIG_HOST", "127.0.0.3")


def master_host(m: int = 1) -> str:
    """Master m's name: its address, or with Kerberos rm.rig.test (1) and rm2.rig.test (2)."""
    if secure_conf.enabled():
        return secure_conf.MASTER2 if m == 2 else secure_conf.MASTER
    return master_address(m)


def masters() -> List[int]:
    return [1, 2] if ha() else [1]


def zk_quorum() -> str:
    return f"{master_address(1)}:{ZK}"


def write_site(path: Path, props: Dict[str, str]) -> None:
    rows = "".join(f"  <property><name>{escape(k)}</name><value>{escape(str(v))}</value></property>\n"
                   for k, v in props.items())
    path.write_text(f'<?xml version="1.0"?>\n<configuration>\n{rows}</configuration>\n')


def core(rig: Path, i: int = 0, m: int = 0) -> Dict[str, str]:
    """core-site.xml of the client (i = 0, m = 0), master m's or node i's."""
    host = master_host(m or 1)
    props = {
        "fs.defaultFS": f"hdfs://{NAMESERVICE}" if ha() else f"hdfs://{host}:8020",
        "hadoop.tmp.dir": str(rig / f"master{m}" / "tmp" if m else rig / "tmp"),
        "hadoop.http.filter.initializers": "org.apache.hadoop.security.AuthenticationFilterInitializer",
        "hadoop.http.authentication.type": "simple",
        "hadoop.http.authentication.simple.anonymous.allowed": "true",
        "hadoop.http.authentication.signature.secret.file": str(rig / "http-secret"),
    }
    if ha():
        props.update({
            "ha.zookeeper.quorum": zk_quorum(),
            "ha.zookeeper.session-timeout.ms": ZK_SESSION_MS,
            # The ResourceManagers' ZooKeeper: hadoop.zk.* since 3.2, yarn.resourcemanager.zk-* before.
            "hadoop.zk.address": zk_quorum(),
            "hadoop.zk.timeout-ms": ZK_SESSION_MS,
            "ha.failover-controller.graceful-fence.rpc-timeout.ms": "2000",
            "ha.failover-controller.graceful-fence.connection.retries": "0",
        })
    if tls():
        props.update({
            "hadoop.ssl.require.client.cert": "false",
            "hadoop.ssl.hostname.verifier": "DEFAULT",
            "hadoop.ssl.keystores.factory.class": "org.apache.hadoop.security.ssl.FileBasedKeyStoresFactory",
            "hadoop.ssl.server.conf": "ssl-server.xml",
            "hadoop.ssl.client.conf": "ssl-client.xml",
            "hadoop.ssl.enabled.protocols": "TLSv1.2",
        })
    if secure_conf.enabled():
        props.update(secure_conf.core(node_host(i) if i else host))
    return props


def hdfs(rig: Path, i: int = 0, m: int = 0) -> Dict[str, str]:
    """The NameNode's settings (i = 0; with RIG_HA=1 the client's, m = 0, or NameNode nn<m>'s)
    or node i's DataNode's."""
    host = master_host(m or 1)
    nodes = int(env("RIG_NODES", "3"))
    props = {
        "dfs.namenode.rpc-address": f"{host}:{NN_RPC}",
        "dfs.namenode.http-address": f"{host}:{NN_HTTP}",
        "dfs.namenode.name.dir": str(rig / f"master{m}" / "hdfs-name" if m else rig / "hdfs-name"),
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
        if tls():
            props["dfs.datanode.https.address"] = f"{node_host(i)}:{DN_HTTPS_PORT + 100 * i}"
    if ha():
        del props["dfs.namenode.rpc-address"], props["dfs.namenode.http-address"]
        ns = NAMESERVICE
        jn = master_host(1)
        props.update({
            "dfs.nameservices": ns,
            f"dfs.ha.namenodes.{ns}": "nn1,nn2",
            f"dfs.client.failover.proxy.provider.{ns}":
                "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider",
            "dfs.namenode.shared.edits.dir": f"qjournal://{jn}:{JN_RPC}/{ns}",
            "dfs.journalnode.edits.dir": str(rig / "journal"),
            "dfs.journalnode.rpc-address": f"{jn}:{JN_RPC}",
            "dfs.journalnode.http-address": f"{jn}:{JN_HTTP}",
            "dfs.journalnode.https-address": f"{jn}:{JN_HTTPS}",
            "dfs.ha.automatic-failover.enabled": "true",
            "dfs.ha.fencing.methods": "shell(/bin/true)",
            "dfs.ha.zkfc.port": str(ZKFC),
            "dfs.ha.tail-edits.period": "5",
            # A client tries the other NameNode at once, then again after 0.2-2 s.
            "dfs.client.failover.sleep.base.millis": "200",
            "dfs.client.failover.sleep.max.millis": "2000",
        })
        for n in masters():
            h = master_host(n)
            props[f"dfs.namenode.rpc-address.{ns}.nn{n}"] = f"{h}:{NN_RPC}"
            props[f"dfs.namenode.http-address.{ns}.nn{n}"] = f"{h}:{NN_HTTP}"
            props[f"dfs.namenode.https-address.{ns}.nn{n}"] = f"{h}:{NN_HTTPS}"
        if m:  # both NameNodes' addresses are this machine's: each is told which it is
            props["dfs.nameservice.id"] = ns
            props["dfs.ha.namenode.id"] = f"nn{m}"
    elif tls():
        props["dfs.namenode.https-address"] = f"{host}:{NN_HTTPS}"
    if tls():
        props["dfs.http.policy"] = "HTTPS_ONLY"
    if secure_conf.enabled():
        props.update(secure_conf.hdfs(node_host(i) if i else host))
    return props


def yarn(rig: Path, i: int = 0, m: int = 0) -> Dict[str, str]:
    """The ResourceManager's and the client's settings (i = 0; with RIG_HA=1 ResourceManager
    rm<m>'s) or node i's NodeManager's."""
    host = master_host(m or 1)
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
        if tls():
            props["yarn.nodemanager.webapp.https.address"] = f"{node_host(i)}:{NM_HTTPS}"
    if ha():
        del props["yarn.resourcemanager.hostname"]
        props.update({
            "yarn.resourcemanager.ha.enabled": "true",
            "yarn.resourcemanager.ha.rm-ids": ",".join(f"rm{n}" for n in masters()),
            "yarn.resourcemanager.cluster-id": "rig",
            "yarn.resourcemanager.ha.automatic-failover.enabled": "true",
            "yarn.resourcemanager.ha.automatic-failover.embedded": "true",
            "yarn.resourcemanager.store.class":
                "org.apache.hadoop.yarn.server.resourcemanager.recovery.ZKRMStateStore",
            "yarn.resourcemanager.zk-address": zk_quorum(),
            "yarn.resourcemanager.zk-timeout-ms": ZK_SESSION_MS,
            "hadoop.zk.address": zk_quorum(),
            "hadoop.zk.timeout-ms": ZK_SESSION_MS,
            # NodeManagers and clients try the other ResourceManager within a second or two.
            "yarn.resourcemanager.connect.retry-interval.ms": "1000",
            "yarn.client.failover-sleep-base-ms": "200",
            "yarn.client.failover-sleep-max-ms": "2000",
        })
        del props["yarn.resourcemanager.fs.state-store.uri"]
        for n in masters():
            h = master_host(n)
            props[f"yarn.resourcemanager.hostname.rm{n}"] = h
            for key, port in RM_PORTS.items():
                props[f"yarn.resourcemanager.{key}.rm{n}"] = f"{h}:{port}"
        if m:  # both addresses are this machine's: each ResourceManager is told which it is
            props["yarn.resourcemanager.ha.id"] = f"rm{m}"
    elif tls():
        props["yarn.resourcemanager.webapp.https.address"] = f"{host}:{RM_PORTS['webapp.https.address']}"
    if tls():
        props["yarn.http.policy"] = "HTTPS_ONLY"
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


def ssl_sites(folder: Path, rig: Path) -> None:
    """ssl-server.xml and ssl-client.xml, and copies of tls.sh's keystore and truststore beside
    them (an isolated node reads only its own folder)."""
    for name in ("keystore.p12", "truststore.jks"):
        (folder / name).write_bytes((rig / "tls" / name).read_bytes())
    trust = {"location": str(folder / "truststore.jks"), "password": TLS_PASSWORD, "type": "jks",
             "reload.interval": "10000"}
    write_site(folder / "ssl-server.xml", {
        "ssl.server.keystore.location": str(folder / "keystore.p12"),
        "ssl.server.keystore.password": TLS_PASSWORD,
        "ssl.server.keystore.keypassword": TLS_PASSWORD,
        "ssl.server.keystore.type": "pkcs12",
        **{f"ssl.server.truststore.{k}": v for k, v in trust.items()},
    })
    write_site(folder / "ssl-client.xml", {f"ssl.client.truststore.{k}": v for k, v in trust.items()})


def zoo_cfg(rig: Path) -> str:
    """The standalone ZooKeeper of RIG_HA=1 (unauthenticated). maxSessionTimeout: Hadoop 3.1's
    ZooKeeper 3.4.9 refuses the long sessions Curator asks for otherwise."""
    return (f"tickTime=1000\ndataDir={rig / 'zk'}\nclientPort={ZK}\nclientPortAddress={master_address(1)}\n"
            "maxClientCnxns=0\nminSessionTimeout=2000\nmaxSessionTimeout=60000\n"
            "admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr,stat,mntr\n")


def write_conf(folder: Path, rig: Path, i: int, m: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_site(folder / "core-site.xml", core(rig, i, m))
    write_site(folder / "hdfs-site.xml", hdfs(rig, i, m))
    write_site(folder / "yarn-site.xml", yarn(rig, i, m))
    if tls():
        ssl_sites(folder, rig)
    write_site(folder / "capacity-scheduler.xml", queues())
    write_site(folder / "resource-types.xml", {"yarn.resource-types": "yarn.io/gpu"})
    write_site(folder / "node-resources.xml", {"yarn.nodemanager.resource-type.yarn.io/gpu": env("RIG_GPUS", "4")})
    (folder / "log4j.properties").write_text(Path(__file__).with_name("log4j.properties").read_text())
    (folder / "hadoop-env.sh").write_text(hadoop_env(folder.parent))


def main(argv: List[str]) -> None:
    rig = Path(argv[1]).resolve()
    write_conf(rig / "conf", rig, 0)
    if ha():
        for m in masters():
            write_conf(rig / f"master{m}" / "conf", rig, 0, m)
        (rig / "conf" / "zoo.cfg").write_text(zoo_cfg(rig))
    for i in range(1, int(env("RIG_NODES", "3")) + 1):
        write_conf(rig / f"node{i}" / "conf", rig, i)


if __name__ == "__main__":
    main(sys.argv)
