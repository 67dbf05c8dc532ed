"""subm reads a production cluster's configuration as Hadoop's own clients do (hadoop/addresses.py):
every ResourceManager of ``rm-ids`` and every NameNode of a nameservice, HTTPS where the policy
says so, trusting what the cluster's clients trust; it follows a standby to the active master,
remembers it, and passes over a master that does not answer, saying a failover in one line.

The masters here are small HTTP servers on loopback (the logic of choosing among them); the
real HA rig's failovers are tests/test_masters_fail_over_mid_job_on_yarn.py.
"""
from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import ssl
import subprocess
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, List, Tuple

import pytest

from submarine_py.backends.yarn.hadoop import addresses
from submarine_py.backends.yarn.hadoop.resourcemanager import ResourceManager
from submarine_py.backends.yarn.hadoop.webhdfs import ClusterFilesystem, Files
from submarine_py.errors import BackendError, SpecError

pytestmark = pytest.mark.unit


def site(folder: Path, name: str, props: dict) -> None:
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
    (folder / name).write_text(f"<configuration>{body}</configuration>")


@pytest.fixture
def conf(tmp_path, monkeypatch):
    for var in (*addresses.CA_BUNDLE_VARIABLES, addresses.RM_URLS_ENV, addresses.AM_RM_URLS_ENV):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    site(tmp_path, "yarn-site.xml", {})
    return tmp_path


HA_YARN = {"yarn.resourcemanager.ha.enabled": "true", "yarn.resourcemanager.ha.rm-ids": "rm1,rm2",
           "yarn.resourcemanager.hostname.rm1": "master1.example", "yarn.resourcemanager.hostname.rm2": "master2.example"}
HA_HDFS = {"dfs.nameservices": "prodns", "dfs.ha.namenodes.prodns": "nn1,nn2",
           "dfs.namenode.rpc-address.prodns.nn1": "master1.example:8020",
           "dfs.namenode.rpc-address.prodns.nn2": "master2.example:8020"}


def test_every_resource_manager_of_rm_ids_is_found_https_where_yarn_http_policy_says(conf):
    site(conf, "yarn-site.xml", {**HA_YARN, "yarn.http.policy": "HTTPS_ONLY",
                                 "yarn.resourcemanager.webapp.https.address.rm2": "0.0.0.0:9443"})
    assert addresses.from_conf().rm_urls == ("https://master1.example:8090", "https://master2.example:9443")
    site(conf, "yarn-site.xml", {**HA_YARN, "yarn.resourcemanager.webapp.address.rm1":
                                 "${yarn.resourcemanager.hostname.rm1}:18088"})
    assert addresses.from_conf().rm_urls == ("http://master1.example:18088", "http://master2.example:8088")


def test_one_resource_manager_and_the_users_override(conf, monkeypatch):
    assert addresses.from_conf().rm_urls == ("http://localhost:8088",)
    site(conf, "yarn-site.xml", {"yarn.resourcemanager.hostname": "rm.example"})
    assert addresses.from_conf().rm_urls == ("http://rm.example:8088",)
    monkeypatch.setenv(addresses.RM_URLS_ENV, "https://a:8090/, b:8088")
    assert addresses.from_conf().rm_urls == ("https://a:8090", "http://b:8088")


def test_an_rm_id_without_an_address_is_refused_naming_the_property(conf):
    site(conf, "yarn-site.xml", {"yarn.resourcemanager.ha.enabled": "true", "yarn.resourcemanager.ha.rm-ids": "rm1,rm2",
                                 "yarn.resourcemanager.hostname.rm1": "m1"})
    with pytest.raises(SpecError, match="yarn.resourcemanager.hostname.rm2"):
        addresses.from_conf()


def test_a_nameservice_is_every_one_of_its_namenodes_swebhdfs_where_dfs_http_policy_says(conf):
    site(conf, "core-site.xml", {"fs.defaultFS": "hdfs://prodns"})
    site(conf, "hdfs-site.xml", {**HA_HDFS, "dfs.http.policy": "HTTPS_ONLY",
                                 "dfs.namenode.https-address.prodns.nn1": "master1.example:50470"})
    found = ClusterFilesystem.from_conf()
    assert found.uri == "hdfs://prodns"
    assert found.namenode_urls == ("https://master1.example:50470", "https://master2.example:9871")
    site(conf, "hdfs-site.xml", HA_HDFS)
    assert ClusterFilesystem.from_conf().namenode_urls == ("http://master1.example:9870", "http://master2.example:9870")


def test_one_namenode_and_a_filesystem_that_is_not_hdfs(conf):
    site(conf, "core-site.xml", {"fs.defaultFS": "hdfs://nn.example:8020"})
    site(conf, "hdfs-site.xml", {"dfs.namenode.http-address": "0.0.0.0:50070"})
    assert ClusterFilesystem.from_conf().namenode_urls == ("http://nn.example:50070",)
    site(conf, "core-site.xml", {"fs.defaultFS": "viewfs://cluster/"})
    with pytest.raises(SpecError) as refused:
        ClusterFilesystem.from_conf()
    assert "viewfs://cluster/ (fs.defaultFS): a viewfs:// mount table" in str(refused.value)
    assert str(refused.value).startswith("environment: ")


def test_nodemanagers_follow_the_resource_managers_scheme(conf, monkeypatch):
    assert addresses.nm_url("node1:8042") == "http://node1:8042"
    monkeypatch.setenv(addresses.AM_RM_URLS_ENV, "https://m1:8090,https://m2:8090")  # in the AM
    assert addresses.nm_url("node1:8044") == "https://node1:8044"


# -- trust ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> Tuple[Path, Path, Path]:
    """A CA, and a certificate it signed for 127.0.0.1: (ca.pem, server.pem, server.key)."""
    if not shutil.which("openssl"):
        pytest.fail("openssl is needed (Debian's openssl package)")
    d = tmp_path_factory.mktemp("ca")
    run = lambda *a: subprocess.run(a, cwd=d, check=True, capture_output=True)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=test CA")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=127.0.0.1")
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.pem", "-days", "2", "-extfile", "san.cnf")
    return d / "ca.pem", d / "server.pem", d / "server.key"


def test_trust_comes_from_subm_ca_bundle_then_the_usual_variables_then_ssl_client_xml(conf, ca, monkeypatch):
    ca_pem = str(ca[0])
    assert addresses.trust().source == "the system's CAs"
    site(conf, "ssl-client.xml", {"ssl.client.truststore.location": ca_pem})
    got = addresses.trust()
    assert "ssl-client.xml" in got.source and ca[0].read_text().strip() in Path(got.bundle).read_text()
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", ca_pem)
    assert addresses.trust().source == f"REQUESTS_CA_BUNDLE={ca_pem}"
    monkeypatch.setenv("SUBM_CA_BUNDLE", "/no/such.pem")
    with pytest.raises(SpecError, match="SUBM_CA_BUNDLE: /no/such.pem is not a file"):
        addresses.trust()


def test_a_jks_truststore_is_read_with_keytool(conf, ca, tmp_path, monkeypatch):
    keytool = shutil.which("keytool")
    if not keytool:
        pytest.fail("keytool (Java) is needed")
    store = tmp_path / "truststore.jks"
    subprocess.run([keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca[0]), "-keystore", str(store),
                    "-storepass", "s3cret", "-storetype", "JKS"], check=True, capture_output=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    site(conf, "ssl-client.xml", {"ssl.client.truststore.location": str(store),
                                  "ssl.client.truststore.password": "s3cret", "ssl.client.truststore.type": "jks"})
    bundle = Path(addresses.trust().bundle).read_text()
    body = "".join(ca[0].read_text().split("\n")[1:-2])
    assert body in "".join(bundle.split("\n"))
    site(conf, "ssl-client.xml", {"ssl.client.truststore.location": str(store),
                                  "ssl.client.truststore.password": "wrong"})
    with pytest.raises(SpecError, match="ssl.client.truststore.password: keytool cannot read"):
        addresses.trust()


# -- choosing among the masters -------------------------------------------------------------------
class Master:
    """An HTTP server on loopback answering with ``answer(handler) -> (status, headers, body)``."""

    def __init__(self, answer: Callable, tls: Tuple[Path, Path] = ()):
        self.answer = answer
        self.calls: List[str] = []
        me = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _any(self):
                me.calls.append(self.path)
                status, headers, body = me.answer(self)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PUT = _any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def masters(*answers, tls=()) -> Iterator[List[Master]]:
    started = [Master(a, tls) for a in answers]
    try:
        yield started
    finally:
        for m in started:
            m.stop()


def apps(_):
    return 200, {"Content-Type": "application/json"}, json.dumps({"apps": {"app": [{"id": "a1"}]}}).encode()


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_a_standbys_redirect_is_followed_and_the_active_remembered(conf):
    with masters(apps) as (active,):
        def standby(_):
            return 307, {"Location": active.url + "/ws/v1/cluster/apps"}, b""

        with masters(standby) as (sb,):
            said: List[str] = []
            rm = ResourceManager([dead_url(), sb.url, active.url], wait_seconds=0, say=said.append)
            assert [a["id"] for a in rm.apps()] == ["a1"]
            assert rm.url == active.url and len(sb.calls) == 1
            rm.apps()
            assert len(sb.calls) == 1 and len(active.calls) == 2  # straight to the active one now
            assert said == []  # nothing happened during the command worth a line


def test_a_failover_during_a_command_is_one_line_and_a_standby_without_an_active_is_waited_for(conf):
    electing = {"left": 3}

    def standby_then_active(h):
        if electing["left"] > 0:  # a standby that knows no active one yet
            electing["left"] -= 1
            return 307, {}, b""
        return apps(h)

    with masters(apps, standby_then_active) as (first, second):
        said: List[str] = []
        rm = ResourceManager([first.url, second.url], wait_seconds=0, say=said.append)
        rm.apps()
        first.stop()
        assert [a["id"] for a in rm.apps()] == ["a1"]  # waited for the election, though wait_seconds=0
        assert rm.url == second.url
        assert len(said) == 1 and said[0].startswith(f"the YARN ResourceManager failed over: {first.url} does not "
                                                     f"answer (connection refused); {second.url} answers (after ")


def test_no_master_answering_is_one_error_naming_each(conf):
    a, b = dead_url(), dead_url()
    rm = ResourceManager([a], wait_seconds=0)
    with pytest.raises(BackendError, match=f"cannot reach the YARN ResourceManager at {a} \\(connection refused\\)"):
        rm.apps()
    rm = ResourceManager(f"{a},{b}", wait_seconds=0)
    rm.quiet_seconds, said = 0.0, []
    rm.say = said.append
    import submarine_py.backends.yarn.hadoop.resourcemanager as module

    old, module.ELECTION_SECONDS = module.ELECTION_SECONDS, 1.0
    try:
        with pytest.raises(BackendError) as refused:
            rm.apps()
    finally:
        module.ELECTION_SECONDS = old
    assert f"{a} (connection refused); {b} (connection refused)" in str(refused.value)
    assert said and "ResourceManagers" in said[0]


def test_https_trusts_the_clusters_ca_whatever_requests_ca_bundle_says(conf, ca, monkeypatch):
    with masters(apps, tls=ca[1:]) as (rm_tls,):
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", shutil.which("python3") or "/bin/sh")  # not a CA bundle at all
        monkeypatch.setenv("SUBM_CA_BUNDLE", str(ca[0]))
        assert [a["id"] for a in ResourceManager([rm_tls.url], wait_seconds=0).apps()] == ["a1"]
        monkeypatch.delenv("SUBM_CA_BUNDLE")
        monkeypatch.delenv("REQUESTS_CA_BUNDLE")
        with pytest.raises(BackendError) as refused:  # at once: no wait for a certificate
            ResourceManager([rm_tls.url], wait_seconds=60).apps()
        assert "presents a certificate that no CA this machine trusts has signed" in str(refused.value)
        assert "set SUBM_CA_BUNDLE to a PEM file of the cluster's CA (docs/yarn.md#tls)" in str(refused.value)


def test_webhdfs_goes_to_the_active_namenode_and_says_a_failover(conf):
    class Standby:
        def info(self, path):
            raise RuntimeError("Operation category READ is not supported in state standby. Visit https://s.apache.org")

    class Active:
        def info(self, path):
            return {"name": path}

        def ls(self, path, detail=True):
            return [{"name": f"{path}/x"}]

    said: List[str] = []
    files = Files(ClusterFilesystem("hdfs://prodns", ("http://nn1:9870", "http://nn2:9870")), "me",
                  say=said.append, wait_seconds=0)
    files._fs = {0: Standby(), 1: Active()}
    assert files.exists("/a") and files.active == 1
    assert said == ["HDFS failed over: http://nn1:9870 is a standby; http://nn2:9870 serves (after 0 s)"]
    assert files.listing("/a") == [{"name": "/a/x"}]
    assert len(said) == 1


def test_a_call_begun_before_a_failover_that_ends_well_does_not_send_the_others_back(conf):
    """An upload streams to a DataNode: begun through the NameNode since killed, it may end well
    after another upload has failed over. The calls after it go to the new active one: the
    failover is said once (CI pass 5b, 2026-12-03: said twice)."""
    class Gone:
        def info(self, path):
            raise ConnectionError("connection refused")

    class Active:
        def info(self, path):
            return {"name": path}

    said: List[str] = []
    files = Files(ClusterFilesystem("hdfs://prodns", ("http://nn1:9870", "http://nn2:9870")), "me",
                  say=said.append, wait_seconds=0)
    files._fs = {0: Gone(), 1: Active()}

    def stream_begun_on_nn1(fs):
        assert files.exists("/other")  # meanwhile another upload fails over to nn2
        return "written"

    assert files._call("write", "/a.part", stream_begun_on_nn1) == "written"
    assert files.active == 1
    assert files.exists("/b")
    assert len(said) == 1 and said[0].startswith("HDFS failed over: http://nn1:9870 does not answer"), said


def test_executors_find_the_am_through_whichever_resource_manager_answers(monkeypatch, tmp_path):
    from submarine_py.executor import am_client, protocol

    def am(_):
        return 200, {}, json.dumps({"url": "http://am:1"}).encode()

    with masters(am) as (rm,):
        env = {protocol.AM_DISCOVERY: f"{dead_url()}/proxy/{{app}}/am,{rm.url}/proxy/{{app}}/am",
               "SKEIN_APPLICATION_ID": "application_1", protocol.AM_DISCOVERY_SECONDS: "20",
               "LOCAL_DIRS": str(tmp_path)}
        assert am_client.discover_am(env) == "http://am:1"
        assert rm.calls == ["/proxy/application_1/am"]


def test_the_am_and_executors_get_every_rm_and_the_clients_ca(tmp_path):
    pytest.importorskip("skein")
    from submarine_py.backends.yarn.client.app_spec import CA_FILE, YarnOptions, build_application_spec
    from submarine_py.executor import protocol
    from submarine_py.jobfile import spec_from_dict
    from submarine_py.plan import make_plan

    ca_file = tmp_path / "ca.pem"
    ca_file.write_text("pem")
    plan = make_plan(spec_from_dict({"name": "j", "roles": {"worker": {"instances": 1, "command": "echo hi"}}},
                                    base_dir=str(tmp_path)))
    spec = build_application_spec(plan, YarnOptions(job_file="job.json", rm_urls=("https://m1:8090", "https://m2:8090"),
                                                    ca_bundle=str(ca_file)))
    assert spec.master.env[addresses.AM_RM_URLS_ENV] == "https://m1:8090,https://m2:8090"
    worker = spec.services["worker"]
    assert worker.env[protocol.AM_DISCOVERY] == ("https://m1:8090/proxy/{app}/pages/subm/v1/am,"
                                                 "https://m2:8090/proxy/{app}/pages/subm/v1/am")
    for where in (spec.master, worker):
        assert where.env[protocol.CA_BUNDLE] == CA_FILE and CA_FILE in where.files
