"""The YARN client's choices that need no cluster: which cluster, how long to wait for it."""
from __future__ import annotations

import http.server
import socket
import threading
from pathlib import Path
from typing import List

import pytest
from click.testing import CliRunner

from submarine_py.backends.yarn.hadoop import resourcemanager
from submarine_py.backends.yarn.hadoop.resourcemanager import ResourceManager
from submarine_py.backends.yarn.hadoop.conf import hadoop_conf_dir
from submarine_py.backends.yarn.client.skein_driver import config_dir_for, fingerprint
from submarine_py.cli import main
from submarine_py.errors import BackendError, SpecError

pytestmark = pytest.mark.unit


def conf(directory: Path, rm_host: str) -> Path:
    directory.mkdir(parents=True)
    (directory / "yarn-site.xml").write_text(
        "<configuration><property><name>yarn.resourcemanager.hostname</name>"
        f"<value>{rm_host}</value></property></configuration>")
    return directory


@pytest.mark.parametrize("args", [["list", "--backend", "yarn"], ["status", "application_1700000000000_0001"],
                                  ["kill", "application_1700000000000_0001"]])
def test_a_hadoop_conf_dir_that_does_not_exist_is_an_error_saying_what_to_do(tmp_path, args):
    missing = tmp_path / "no-such-conf"
    result = CliRunner().invoke(main, args, env={"HADOOP_CONF_DIR": str(missing)})
    assert result.exit_code == 2, result.output
    assert f"Error: HADOOP_CONF_DIR: {missing} does not exist; point it at your cluster's Hadoop configuration" \
        in result.output


def test_the_yarn_backend_needs_a_hadoop_conf_dir_with_a_yarn_site(tmp_path, monkeypatch):
    monkeypatch.delenv("SUBM_YARN_RM_URL", raising=False)
    with pytest.raises(SpecError, match="HADOOP_CONF_DIR: not set"):
        hadoop_conf_dir()
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    with pytest.raises(SpecError, match="has no yarn-site.xml"):
        hadoop_conf_dir()


def test_each_cluster_configuration_gets_its_own_skein_config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SUBM_SKEIN_HOME", str(tmp_path / "skein"))
    a, b = conf(tmp_path / "a", "rm-a.example.com"), conf(tmp_path / "b", "rm-b.example.com")
    dir_a, dir_b = config_dir_for(str(a)), config_dir_for(str(b))
    assert dir_a != dir_b
    assert Path(dir_a).parent == tmp_path / "skein" and Path(dir_a).name.startswith("rm-a.example.com-")
    assert config_dir_for(str(a)) == dir_a  # stable: the same driver next time
    before = fingerprint(str(a))
    (a / "yarn-site.xml").write_text((a / "yarn-site.xml").read_text().replace("rm-a", "rm-c"))
    assert fingerprint(str(a)) != before  # a changed configuration replaces the driver


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Apps(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        body = b'{"app": {"id": "application_1_1", "state": "RUNNING"}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_resource_manager_that_comes_back_is_waited_for_saying_so():
    port = free_port()
    said = []
    rm = ResourceManager(f"http://127.0.0.1:{port}", timeout=1, wait_seconds=60, say=said.append)
    servers = []
    later = threading.Timer(1.5, lambda: servers.append(_serve(port)))  # nothing listens until then
    later.start()
    try:
        assert rm.app("application_1_1")["state"] == "RUNNING"
    finally:
        later.join()
        for server in servers:
            server.shutdown()
    assert said[0].startswith(f"the YARN ResourceManager at http://127.0.0.1:{port} does not answer")
    assert "at most 60 s: SUBM_RM_WAIT" in said[0]
    assert said[-1].startswith(f"the YARN ResourceManager at http://127.0.0.1:{port} answers again")


def _serve(port: int) -> http.server.HTTPServer:
    server = http.server.HTTPServer(("127.0.0.1", port), _Apps)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Clock:
    """The ResourceManager module's ``time``: its clock moves by the module's own sleeps only."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: List[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_waiting_for_the_resource_manager_is_bounded(monkeypatch):
    """Nothing answers: it asks again each second, once more when SUBM_RM_WAIT is spent, then
    gives up. (How long that takes on a real clock: bench/latencies.py.)"""
    monkeypatch.setenv("SUBM_RM_WAIT", "2.5")
    clock = Clock()
    monkeypatch.setattr(resourcemanager, "time", clock)
    rm = ResourceManager(f"http://127.0.0.1:{free_port()}", timeout=1, say=lambda line: None)
    asked: List[float] = []
    request = rm.session.request

    def counted(*args, **kw):
        asked.append(clock.now)
        assert len(asked) <= 10, f"still asking at {asked}"  # a wait that never ends fails, not hangs
        return request(*args, **kw)

    monkeypatch.setattr(rm.session, "request", counted)
    with pytest.raises(BackendError, match=r"cannot reach the YARN ResourceManager .*wait longer with SUBM_RM_WAIT"):
        rm.app("application_1_1")
    assert [t - 1000.0 for t in asked] == [0.0, 1.0, 2.0, 2.5]
    assert clock.slept == [1.0, 1.0, 0.5]  # never past SUBM_RM_WAIT


def test_subm_rm_wait_must_be_seconds(monkeypatch):
    monkeypatch.setenv("SUBM_RM_WAIT", "soon")
    with pytest.raises(SpecError, match="SUBM_RM_WAIT: expected seconds"):
        ResourceManager("http://127.0.0.1:1")


def test_the_driver_starts_with_the_clusters_files_and_a_shorter_first_wait_to_close_a_file(tmp_path):
    """Each application's staging files are closed as soon as written: the driver's HDFS client
    asks again after 50 ms, not 400, as long in all; what the cluster sets itself is kept."""
    import xml.etree.ElementTree as ET
    from submarine_py.backends.yarn.hadoop.conf import hadoop_conf
    from submarine_py.backends.yarn.client.skein_driver import CLOSE_WAIT, driver_conf

    cluster = conf(tmp_path / "cluster", "rm1")
    (cluster / "core-site.xml").write_text("<configuration/>")
    (cluster / "log4j.properties").write_text("x=1\n")
    driver = tmp_path / "driver"
    driver.mkdir()
    out = Path(driver_conf(str(cluster), str(driver)))
    assert sorted(p.name for p in out.iterdir()) == ["core-site.xml", "hdfs-site.xml", "log4j.properties",
                                                     "yarn-site.xml"]
    assert (out / "yarn-site.xml").resolve() == (cluster / "yarn-site.xml").resolve()  # links: it follows them
    assert hadoop_conf("hdfs-site.xml", str(out)) == CLOSE_WAIT
    delay = "dfs.client.block.write.locateFollowingBlock.initial.delay.ms"
    (cluster / "hdfs-site.xml").write_text(
        "<configuration><property><name>dfs.replication</name><value>3</value></property>"
        f"<property><name>{delay}</name><value>1000</value></property></configuration>")
    out = Path(driver_conf(str(cluster), str(driver)))  # made again: the cluster's file changed
    got = hadoop_conf("hdfs-site.xml", str(out))
    assert got["dfs.replication"] == "3" and got[delay] == "1000"  # the cluster's own word stays
    assert got["dfs.client.block.write.locateFollowingBlock.retries"] == "8"
    assert ET.parse(out / "hdfs-site.xml").getroot().tag == "configuration"
