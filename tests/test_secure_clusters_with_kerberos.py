"""Secure (Kerberized) YARN: who may submit, see and stop a job, and how.

The ``unit`` tests need no cluster. The ``secure`` ones run on the project's Kerberized rig
(``RIG_KERBEROS=1 scripts/rig.sh``, started by ``bash scripts/with-secure-rig.sh bash
scripts/test.sh -m secure``: YARN and HDFS Kerberized, users alice and bob with keytabs in
``/tmp/krb``, SPNEGO on every web endpoint, YARN's ACLs on); each user's ticket lives in a ticket
cache of the test's own (``KRB5CCNAME``).
"""
from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
import tempfile
from typing import Dict, List, Tuple

import pytest

from conftest import YARN_CONF_DIR, cli, skip_without_container_executor, subm_argv, subm_env
from venvs import ISOLATED_NODES, new_shared_folder
from submarine_py.errors import CredentialsError, SpecError
from submarine_py.jobfile import spec_from_dict
from submarine_py.jobfile.model import KerberosSpec
from submarine_py.plan import make_plan

#: Where the secure rig keeps the users' keytabs.
KEYTABS = Path(os.environ.get("SUBM_SECURE_KEYTABS", "/tmp/krb"))


def job(**more) -> dict:
    data = {"name": "secure-job", "tags": ["subm-test"],
            "roles": {"worker": {"instances": 2, "resources": {"memory": "256 MiB"},
                                 "command": "echo task runs as $(id -un); sleep 5"}}}
    data.update(more)
    return data


# -- the job file and the application spec (no cluster) ------------------------------------------
@pytest.mark.unit
def test_acls_name_users_groups_or_everyone_and_reach_yarn_as_skeins_acls_always_on(tmp_path):
    skein = pytest.importorskip("skein")
    from submarine_py.backends.yarn.client.app_spec import YarnOptions, build_application_spec

    spec = spec_from_dict(job(acls={"view": ["bob", "group:research"], "modify": ["carol", "*"]}))
    opts = YarnOptions(job_file=str(tmp_path / "j"), rm_urls=("http://rm:8088",))
    acls = build_application_spec(make_plan(spec), opts).acls
    assert isinstance(acls, skein.ACLs) and acls.enable is True
    assert (acls.view_users, acls.view_groups) == (["bob"], ["research"])
    assert (acls.modify_users, acls.modify_groups) == (["carol", "*"], [])
    # Without acls: the owner and the admins only (skein's default would let anyone kill the job).
    default = build_application_spec(make_plan(spec_from_dict(job())), opts).acls
    assert default.enable is True and default.view_users == default.modify_users == []
    # skein's page of the AM stays open: the RM's proxy in front of it checks the view ACL.
    assert acls.ui_users == default.ui_users == ["*"]


@pytest.mark.unit
@pytest.mark.parametrize("acls, message", [
    ({"view": "bob smith"}, "acls.view[0]: expected a user name, group:NAME or *"),
    ({"modify": [3]}, "acls.modify[0]: expected a user name"),
    ({"kill": ["bob"]}, "acls.kill: unknown field; known fields: view, modify"),
    ({"view": {"bob": 1}}, "acls.view: expected a list of user names"),
])
def test_malformed_acls_are_refused_naming_the_entry(acls, message):
    with pytest.raises(SpecError) as err:
        spec_from_dict(job(acls=acls))
    assert message in str(err.value)


@pytest.mark.unit
def test_the_job_file_gives_a_principal_with_its_keytab_or_neither():
    with pytest.raises(SpecError, match="kerberos.keytab: is required"):
        spec_from_dict(job(kerberos={"principal": "alice@RIG.TEST"}))
    with pytest.raises(SpecError, match="kerberos.principal: expected name"):
        spec_from_dict(job(kerberos={"principal": "alice smith", "keytab": "/k"}))


@pytest.mark.unit
def test_every_hdfs_filesystem_the_job_names_gets_a_delegation_token(tmp_path):
    pytest.importorskip("skein")
    from submarine_py.backends.yarn.client.app_spec import file_systems

    spec = spec_from_dict(job(files={"data.csv": "hdfs://nn1:8020/data/train.csv", "conf.json": "hdfs://nn1:8020/c",
                                     "model.bin": "viewfs://cluster/models/m", "notes": "https://example.com/n",
                                     "other": "hdfs:///default/fs/file"},
                              environment={"archive": "hdfs://nn2/envs/env.tar.gz"}))
    assert file_systems(make_plan(spec)) == ["hdfs://nn1:8020", "viewfs://cluster", "hdfs://nn2"]


# -- who submits (no cluster) --------------------------------------------------------------------
@pytest.mark.unit
def test_the_login_comes_from_the_options_then_the_environment_then_the_job_file(monkeypatch):
    from submarine_py.backends.yarn.hadoop import kerberos

    in_file = KerberosSpec(principal="alice@R", keytab="/f/alice.keytab")
    monkeypatch.delenv("SUBM_PRINCIPAL", raising=False)
    monkeypatch.delenv("SUBM_KEYTAB", raising=False)
    assert kerberos.requested() == kerberos.Login()  # the ticket cache
    assert kerberos.requested(in_file).keytab == "/f/alice.keytab"
    monkeypatch.setenv("SUBM_PRINCIPAL", "bob@R")
    monkeypatch.setenv("SUBM_KEYTAB", "/e/bob.keytab")
    assert kerberos.requested(in_file).principal == "bob@R"
    assert kerberos.requested(in_file, principal="carol@R", keytab="/o/c.keytab").keytab == "/o/c.keytab"
    monkeypatch.delenv("SUBM_KEYTAB")
    with pytest.raises(SpecError, match="SUBM_PRINCIPAL/SUBM_KEYTAB: a keytab is needed too"):  # noqa
        kerberos.requested(in_file)


@pytest.mark.unit
@pytest.mark.parametrize("command, api", [
    (["status", "application_1_0001"], "status"), (["wait", "application_1_0001"], "wait"),
    (["kill", "application_1_0001"], "kill"), (["logs", "application_1_0001"], "write_logs"),
    (["list"], "jobs"), (["cluster"], "cluster"), (["history", "--no-collect"], "History"),
])
def test_every_command_that_talks_to_a_cluster_logs_in_with_the_options_then_the_environment(
        monkeypatch, command, api):
    """--principal/--keytab on every such command, before SUBM_PRINCIPAL/SUBM_KEYTAB; neither:
    the ticket cache (subm run adds the job file's kerberos after both, tested above)."""
    from submarine_py import client, history
    from submarine_py.backends.yarn.hadoop import kerberos

    def login_asked(*args, **kwargs):
        login = kerberos.requested()
        raise SpecError([("", f"would log in as {login.principal or 'the ticket cache'} {login.keytab or ''}")])

    monkeypatch.setattr(history if api == "History" else client, api, login_asked)
    env = {"SUBM_PRINCIPAL": "bob@R", "SUBM_KEYTAB": "/e/bob.keytab"}
    code, out, err = cli(*command, "--principal", "carol@R", "--keytab", "/o/carol.keytab", env=env)
    assert code == 2 and "would log in as carol@R /o/carol.keytab" in err, err
    code, out, err = cli(*command, env=env)
    assert code == 2 and "would log in as bob@R /e/bob.keytab" in err, err
    code, out, err = cli(*command, env={"SUBM_PRINCIPAL": None, "SUBM_KEYTAB": None})
    assert code == 2 and "would log in as the ticket cache" in err, err
    code, out, err = cli(*command, "--principal", "carol@R", env={"SUBM_PRINCIPAL": None, "SUBM_KEYTAB": None})
    assert code == 2 and "a keytab is needed too" in err, err


@pytest.mark.unit
def test_a_driver_serves_one_login_only(tmp_path, monkeypatch):
    from submarine_py.backends.yarn.hadoop.kerberos import Login
    from submarine_py.backends.yarn.client.skein_driver import config_dir_for

    conf = secure_conf_dir(tmp_path)
    monkeypatch.setenv("SUBM_SKEIN_HOME", str(tmp_path / "drivers"))
    plain = config_dir_for(conf)
    alice_ticket = config_dir_for(conf, Login(principal="alice@R"))
    bob_ticket = config_dir_for(conf, Login(principal="bob@R"))
    alice_keytab = config_dir_for(conf, Login(principal="alice@R", keytab="/k/alice.keytab"))
    assert len({plain, alice_ticket, bob_ticket, alice_keytab}) == 4
    assert alice_ticket == config_dir_for(conf, Login(principal="alice@R"))


def secure_conf_dir(tmp_path: Path, rm: str = "127.0.0.1:9") -> str:
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    site = "<configuration>{}</configuration>"
    prop = "<property><name>{}</name><value>{}</value></property>"
    (conf / "core-site.xml").write_text(site.format(prop.format("hadoop.security.authentication", "kerberos")))
    (conf / "yarn-site.xml").write_text(site.format(prop.format("yarn.resourcemanager.webapp.address", rm)))
    return str(conf)


@pytest.mark.unit
@pytest.mark.skipif(not shutil.which("klist"), reason="needs MIT Kerberos's klist (krb5-user)")
def test_no_ticket_is_one_line_and_exit_2_before_anything_is_submitted(tmp_path):
    """The RM's address answers nothing: the login is checked before the cluster is asked."""
    (tmp_path / "job.yaml").write_text(json.dumps(job()))
    env = {"HADOOP_CONF_DIR": secure_conf_dir(tmp_path), "KRB5CCNAME": f"FILE:{tmp_path}/no-cache",
           "SUBM_RM_WAIT": "0"}
    code, out, err = cli("run", str(tmp_path / "job.yaml"), "--backend", "yarn", env=env)
    assert code == 2, err
    assert err.strip().count("\n") == 0, err
    assert "no Kerberos ticket" in err and "run `kinit`" in err


@pytest.mark.unit
@pytest.mark.skipif(not shutil.which("kinit"), reason="needs MIT Kerberos's kinit (krb5-user)")
def test_a_keytab_that_does_not_log_in_names_itself_and_what_to_run(tmp_path):
    (tmp_path / "job.yaml").write_text(json.dumps(job()))
    (tmp_path / "wrong.keytab").write_bytes(b"\x05\x02")  # a keytab with no key
    env = {"HADOOP_CONF_DIR": secure_conf_dir(tmp_path), "SUBM_RM_WAIT": "0"}
    code, out, err = cli("run", str(tmp_path / "job.yaml"), "--backend", "yarn", "--principal", "alice@R",
                         "--keytab", str(tmp_path / "wrong.keytab"), env=env)
    assert code == 2, err
    assert err.strip().count("\n") == 0, err
    assert f"the keytab {tmp_path}/wrong.keytab (--principal/--keytab or SUBM_PRINCIPAL/SUBM_KEYTAB) " \
           "does not log in alice@R" in err
    assert "klist -kt" in err
    code, out, err = cli("run", str(tmp_path / "job.yaml"), "--backend", "yarn", "--principal", "alice@R",
                         "--keytab", str(tmp_path / "missing.keytab"), env=env)
    assert code == 2 and "does not exist" in err, err


class _Negotiating(http.server.BaseHTTPRequestHandler):
    """A web endpoint as a secure cluster's: 401 asking for SPNEGO, whatever is asked."""

    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", "Negotiate")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.mark.unit
@pytest.mark.skipif(not shutil.which("klist"), reason="needs MIT Kerberos's klist (krb5-user)")
def test_an_endpoint_asking_for_spnego_without_a_ticket_says_to_kinit(monkeypatch, tmp_path):
    pytest.importorskip("requests_gssapi")
    from submarine_py.backends.yarn.hadoop.nodemanager import node_log
    from submarine_py.backends.yarn.hadoop.resourcemanager import ResourceManager

    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path}/no-cache")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Negotiating)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(CredentialsError, match="no Kerberos ticket"):
            ResourceManager(url, wait_seconds=0).nodes()
        with pytest.raises(CredentialsError, match="no Kerberos ticket"):
            node_log(url, "container_1", "stdout")
    finally:
        server.shutdown()


@pytest.mark.unit
@pytest.mark.parametrize("value", [0, 1, 127, -112, 128, 300, 70000, -113, -70000, 2**31 - 1])
def test_hadoops_variable_length_integers_round_trip(value):
    from submarine_py.backends.yarn.am.tokens import read_vint, write_vint

    assert read_vint(write_vint(value), 0) == (value, len(write_vint(value)))


@pytest.mark.unit
def test_the_am_finds_its_rm_delegation_token_in_the_containers_token_file(tmp_path):
    """A Credentials file as Hadoop writes it (version 0): an AMRM token, then the RM's."""
    import base64

    from submarine_py.backends.yarn.am.tokens import TOKEN_HEADERS, read_vint, rm_token_header, write_vint

    def text(b: bytes) -> bytes:
        return write_vint(len(b)) + b

    tokens = [(b"amrm-alias", b"\x01id", b"pw", b"YARN_AM_RM_TOKEN", b""),
              (b"rm-alias", b"\x00\x05alice" * 30, b"secret" * 5, b"RM_DELEGATION_TOKEN", b"127.0.0.80:8032")]
    body = write_vint(len(tokens)) + b"".join(b"".join(text(x) for x in t) for t in tokens) + write_vint(0)
    (tmp_path / "tokens").write_bytes(b"HDTS\x00" + body)
    headers = rm_token_header(str(tmp_path / "tokens"))
    assert set(headers) == set(TOKEN_HEADERS) and len(set(headers.values())) == 1
    header = headers["X-Hadoop-Delegation-Token"]
    raw = base64.urlsafe_b64decode(header + "=" * (-len(header) % 4))
    fields, at = [], 0
    for _ in range(4):
        size, at = read_vint(raw, at)
        fields.append(raw[at:at + size])
        at += size
    assert tuple(fields) == tokens[1][1:] and at == len(raw)
    assert rm_token_header(str(tmp_path / "missing")) == {}


class _ExpiredToken(http.server.BaseHTTPRequestHandler):
    """The RM's web services to an AM whose delegation token is past its maximum lifetime (as
    Hadoop 3.1.2's AuthenticationFilter answers: 403 and an HTML page quoting the exception)."""

    asked: List[str] = []

    def do_GET(self) -> None:
        type(self).asked.append(self.path)
        body = (b"<html><head><title>Error 403 org.apache.hadoop.security.token.SecretManager$InvalidToken: "
                b"token (RM_DELEGATION_TOKEN owner=alice, renewer=root, realUser=, issueDate=1, maxDate=2, "
                b"sequenceNumber=1, masterKeyId=2) is expired, current time: 2026-11-25 03:30:00,000+0000 "
                b"expected renewal time: 2026-11-25 03:25:00,000+0000</title></head><body>...</body></html>")
        self.send_response(403)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.mark.unit
def test_an_am_whose_delegation_token_expired_says_so_once_and_admits_without_the_room(caplog):
    """Past the token's maximum lifetime the RM refuses it for good: the AM says why once, asks
    the RM no more, and every gang is admitted (YARN's scheduler places it), so the job goes on."""
    import logging

    from submarine_py.admission import Verdict
    from submarine_py.backends.yarn.am.containers import YarnContainers
    from submarine_py.backends.yarn.hadoop.resourcemanager import ResourceManager
    from submarine_py.states import Placement

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ExpiredToken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        rm = ResourceManager(f"http://127.0.0.1:{server.server_address[1]}", wait_seconds=0,
                             token_headers={"X-Hadoop-Delegation-Token": "dG9rZW4"})
        plan = make_plan(spec_from_dict(job()))
        yc = YarnContainers(object(), plan, user="alice", rm=rm, app_id="application_1_0001")
        asked_at_start = len(_ExpiredToken.asked)  # the scheduler's minimum allocation, once
        with caplog.at_level(logging.WARNING, logger="subm.am.yarn"):
            for _ in range(3):
                assert yc.admit(plan.tasks, Placement.PACK) == Verdict(True)
        warned = [r.getMessage() for r in caplog.records if "room" in r.getMessage()]
        assert len(warned) == 1, warned
        assert "cannot read the cluster's room any more: the ResourceManager refused this application's " \
               "delegation token (HTTP 403 to GET /ws/v1/cluster/nodes: SecretManager$InvalidToken: token " \
               "(RM_DELEGATION_TOKEN" in warned[0]
        assert "is expired" in warned[0] and "max-lifetime" in warned[0] and "the job goes on" in warned[0]
        assert len(_ExpiredToken.asked) == asked_at_start + 1  # one refused read, then none
    finally:
        server.shutdown()


class _NoNativeIO(http.server.BaseHTTPRequestHandler):
    """A secure NodeManager without libhadoop.so: it lists a container's log files, and answers
    500 for each file (Hadoop 3.1.2's SecureIOUtils)."""

    def do_GET(self) -> None:
        if self.path.split("?")[0].endswith("/logs"):
            code, body = 200, json.dumps({"containerLogsInfo": {"containerLogInfo": [
                {"fileName": "stdout", "fileSize": "20"}, {"fileName": "stderr", "fileSize": "0"}]}})
        else:
            code, body = 500, json.dumps({"RemoteException": {
                "exception": "WebApplicationException", "javaClassName": "javax.ws.rs.WebApplicationException",
                "message": "java.io.IOException: Secure IO is not possible without native code extensions."}})
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args) -> None:
        pass


@pytest.mark.unit
def test_a_nodemanager_that_refuses_a_log_file_is_named_in_one_line_with_what_it_means():
    import io

    from submarine_py.backends.yarn.client.app_logs import _LogCopier
    from submarine_py.backends.yarn.hadoop.nodemanager import node_log

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NoNativeIO)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        node = f"127.0.0.1:{server.server_address[1]}"
        assert node_log(node, "container_1_0001_01_000002", "subm-report.json") is None  # status goes on
        out = io.StringIO()
        copier = _LogCopier(out)
        copier.copy((node, "container_1_0001_01_000002"), ("stdout", "stderr"), "worker:0 {name}")
        [said] = copier.refused  # stdout (stderr is empty: not asked)
        assert said == (f"the NodeManager at {node} refused to serve stdout of container_1_0001_01_000002 (HTTP 500: "
                        "IOException: Secure IO is not possible without native code extensions.); this means the NodeManager "
                        "lacks Hadoop's native library (libhadoop.so in $HADOOP_HOME/lib/native), without which a "
                        "secure NodeManager cannot open a user's log files: its admin installs it "
                        "(docs/security.md)")
    finally:
        server.shutdown()


class _ReducedRM:
    """The RM as it answers a user outside a job's view ACL: its reduced record (no times)."""

    def __init__(self):
        self.state, self.killed = "RUNNING", []

    def app(self, app_id):
        return {"id": app_id, "user": "alice", "name": "secure-job", "state": self.state, "finalStatus": "UNDEFINED",
                "startedTime": 0, "finishedTime": 0, "elapsedTime": 0, "diagnostics": ""}

    def kill(self, app_id, diagnostics=""):
        self.killed.append(app_id)
        self.state = "KILLED"


@pytest.mark.unit
def test_a_user_outside_the_view_acl_is_refused_naming_the_acl_and_the_owner_but_may_kill_with_modify(monkeypatch):
    from submarine_py.backends.yarn.client.backend import YarnBackend
    from submarine_py.errors import AccessDeniedError

    monkeypatch.setenv("HADOOP_USER_NAME", "bob")
    backend = YarnBackend()
    backend.__dict__["rm"] = rm = _ReducedRM()
    with pytest.raises(AccessDeniedError) as refused:
        backend.status("application_1_0001")
    assert str(refused.value) == ("bob may not view application_1_0001 (owner alice): bob is not in the job's view "
                                  "ACL (acls.view in its job file, YARN's VIEW_APP); ask alice to add bob to "
                                  "acls.view, or a YARN admin (yarn.admin.acl) to look")
    # acls.modify without acls.view: the kill is YARN's to allow; bob learns YARN's state only.
    report = backend.kill("application_1_0001")
    assert rm.killed == ["application_1_0001"] and report.state.value == "KILLED" and report.final


# -- the admin's side: subm hadoop-conf ----------------------------------------------------------
def props(text: str) -> Dict[str, str]:
    import xml.etree.ElementTree as ET

    return {p.findtext("name"): p.findtext("value") or "" for p in ET.fromstring(text.encode()).iter("property")}


#: The rig's daemons run as root (scripts/rig.sh), its admins are root, and its NodeManagers reach
#: the RM from 127.0.0.1 (so service-level authorization is off there).
RIG_VALUES = {"kerberos_realm": "RIG.TEST", "keytab_dir": "/tmp/krb", "daemon_user": "root",
              "yarn_admins": "root", "service_authorization": "false"}


@pytest.mark.unit
def test_hadoop_conf_with_a_realm_adds_principals_keytabs_spnego_acls_and_a_core_site():
    from submarine_py.hadoopconf import render_hadoop_conf

    plain = render_hadoop_conf()
    assert "core-site.xml" not in plain and "yarn.resourcemanager.principal" not in props(plain["yarn-site.xml"])
    files = render_hadoop_conf({"kerberos_realm": "EXAMPLE.COM"})
    site, core = props(files["yarn-site.xml"]), props(files["core-site.xml"])
    assert site["yarn.resourcemanager.principal"] == "rm/_HOST@EXAMPLE.COM"
    assert site["yarn.nodemanager.keytab"] == "/etc/security/keytabs/yarn.keytab"
    assert site["yarn.nodemanager.webapp.spnego-keytab-file"] == "/etc/security/keytabs/http.keytab"
    assert site["yarn.acl.enable"] == "true" and site["yarn.admin.acl"] == "yarn"
    # Secure mode needs the LinuxContainerExecutor: tasks run as the submitting user.
    assert site["yarn.nodemanager.container-executor.class"].endswith(".LinuxContainerExecutor")
    assert core["hadoop.security.authentication"] == "kerberos"
    assert core["hadoop.http.authentication.type"] == "kerberos"
    assert "RULE:[1:$1@$0](.*@EXAMPLE.COM)s/@.*//" in core["hadoop.security.auth_to_local"]
    # A queue's administrators may kill any of its jobs: in secure mode only YARN's admins are.
    queues = props(files["capacity-scheduler.xml"])
    assert queues["yarn.scheduler.capacity.root.acl_administer_queue"] == "yarn"
    assert queues["yarn.scheduler.capacity.root.default.acl_administer_queue"] == "yarn"
    assert props(plain["capacity-scheduler.xml"])["yarn.scheduler.capacity.root.default.acl_administer_queue"] == "*"
    with pytest.raises(SpecError, match="kerberos_realm: expected an upper-case Kerberos realm"):
        render_hadoop_conf({"kerberos_realm": "example.com"})


@pytest.mark.secure
def test_hadoop_conf_renders_the_secure_settings_the_rig_runs_with(rig):
    """Every secure-mode property `subm hadoop-conf` renders that the rig sets, it sets alike
    (_HOST is the RM's own name there)."""
    from submarine_py.hadoopconf import render_hadoop_conf

    files = render_hadoop_conf(RIG_VALUES)
    checked = 0
    for name in ("core-site.xml", "yarn-site.xml", "capacity-scheduler.xml"):
        ours, rigs = props(files[name]), props(Path(rig, name).read_text())
        for key, value in ours.items():
            if key in rigs and ("security" in key or "kerberos" in key or "spnego" in key or "principal" in key
                                or "keytab" in key or "acl" in key.lower() or key.startswith("hadoop.http")):
                # An HA rig maps its JournalNode's principal too (HDFS HA is not rendered here).
                rig_value = "\n".join(r for r in rigs[key].replace("rm.rig.test", "_HOST").split("\n")
                                      if not r.startswith("RULE:[2:$1@$0](jn@"))
                assert rig_value == value, key
                checked += 1
    assert checked >= 15


# -- on the Kerberized rig ----------------------------------------------------------------------
def _secure_rig() -> str:
    conf = YARN_CONF_DIR or ""
    core = Path(conf, "core-site.xml")
    if not conf or not core.is_file() or "kerberos" not in core.read_text():
        pytest.skip("no secure YARN: HADOOP_CONF_DIR must name a Kerberized cluster "
                    "(bash scripts/with-secure-rig.sh ...)")
    if not (KEYTABS / "alice.keytab").is_file():
        pytest.skip(f"no keytabs for alice and bob in {KEYTABS} (bash scripts/with-secure-rig.sh ...)")
    return conf


@pytest.fixture(scope="module")
def rig() -> str:
    return _secure_rig()


class User:
    """A user of the rig as a person would be one: their own Unix account (made by the rig), home
    for subm (SUBM_HOME, skein's drivers) and ticket cache; ``subm`` runs as them (runuser)."""

    def __init__(self, name: str, rig: str, with_ticket: bool = True):
        self.name = name
        self.dir = Path(tempfile.mkdtemp(prefix=f"subm-secure-{name}-"))
        shutil.chown(self.dir, name)
        self.env = {"HADOOP_CONF_DIR": rig, "HOME": str(self.dir), "SUBM_HOME": str(self.dir / "subm"),
                    "SUBM_SKEIN_HOME": str(self.dir / "skein"), "KRB5CCNAME": f"FILE:{self.dir}/cc",
                    "SKEIN_CONFIG": str(self.dir / "skein-config")}
        #: Where the user's tasks and the test share files: a folder every node sees (the rig's
        #: shared one, where nodes are isolated and see nothing else of this machine).
        self.shared = new_shared_folder(f"subm-secure-{name}-", elsewhere=self.dir)
        shutil.chown(self.shared, name)
        if ISOLATED_NODES:  # their jobs' environment travels: each user packs it once, in a cache of theirs
            packed = Path(tempfile.gettempdir()) / f"subm-secure-packed-{name}"
            packed.mkdir(exist_ok=True)
            shutil.chown(packed, name)
            self.env["SUBM_PACK_CACHE"] = str(packed)
        if with_ticket:
            self.run(["kinit", "-kt", str(KEYTABS / f"{name}.keytab"), name], check=True)

    def run(self, argv, check: bool = False, timeout: float = 300) -> subprocess.CompletedProcess:
        env = subm_env(self.env)
        return subprocess.run(["runuser", "-u", self.name, "--", *argv], env=env, cwd=self.dir, text=True,
                              capture_output=True, timeout=timeout, check=check)

    def subm(self, *args: str, timeout: float = 300) -> Tuple[int, str, str]:
        # An interpreter these users may run (with-secure-rig.sh makes one: Debian's python3
        # with the project's packages), else this one.
        python = os.environ.get("SUBM_SECURE_PYTHON") or sys.executable
        done = self.run([python, *subm_argv(*args)[1:]], timeout=timeout)
        return done.returncode, done.stdout, done.stderr

    def rm_app(self, app_id: str) -> Dict[str, object]:
        """The RM's record of an application, as this user reads it (SPNEGO)."""
        python = os.environ.get("SUBM_SECURE_PYTHON") or sys.executable
        done = self.run([python, "-c", "import json, sys; from submarine_py.backends.yarn.hadoop.resourcemanager import "
                         "ResourceManager; print(json.dumps(ResourceManager().app(sys.argv[1])))", app_id], check=True)
        return json.loads(done.stdout)

    def job_file(self, **more) -> str:
        path = self.dir / "job.yaml"
        path.write_text(json.dumps(job(**more)))
        shutil.chown(path, self.name)
        return str(path)

    def stop_drivers(self) -> None:
        from submarine_py.backends.yarn.client.skein_driver import stop_drivers

        stop_drivers(str(self.dir / "skein"))


@pytest.fixture
def users(rig):
    made: List[User] = []

    def make(name: str, with_ticket: bool = True) -> User:
        made.append(User(name, rig, with_ticket))
        return made[-1]

    yield make
    for user in made:
        user.stop_drivers()
        shutil.rmtree(user.dir, ignore_errors=True)
        shutil.rmtree(user.shared, ignore_errors=True)


@pytest.mark.secure
def test_alice_runs_a_job_after_kinit_and_follows_it_through_spnego(users):
    alice = users("alice")
    whoami = alice.shared / "whoami"
    code, out, err = alice.subm("run", alice.job_file(roles={"worker": {
        "instances": 2, "resources": {"memory": "256 MiB"},
        "command": f"id -un > {whoami}-$SUBM_INDEX; sleep 5"}}), "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["state"] == "SUCCEEDED"
    assert "AM: gang ready" in err  # the AM's progress, through the RM's proxy
    assert alice.rm_app(report["app_id"])["user"] == "alice"
    code, out, err = alice.subm("status", report["app_id"], "-o", "json")
    assert code == 0 and json.loads(out)["state"] == "SUCCEEDED", err
    code, out, err = alice.subm("list", "--all", "-o", "json")
    assert code == 0 and report["app_id"] in out, err
    # The executor went to alice's folder once, through WebHDFS with SPNEGO, and is shared by
    # her later jobs (what --dry-run says it will localize, already there).
    code, out, err = alice.subm("run", alice.job_file(), "--dry-run")
    assert code == 0, err
    shared = next(line for line in out.splitlines() if line.startswith("# the executor: "))
    assert "/user/alice/.subm/executors/executor-" in shared and "uploaded at submission" not in shared, shared
    ran_as = {whoami.with_name(f"whoami-{i}").read_text().strip() for i in (0, 1)}
    # The LinuxContainerExecutor runs tasks as their user; the rig's default one, as the NM's.
    lce = on_the_linux_container_executor(alice.env["HADOOP_CONF_DIR"])
    assert ran_as == ({"alice"} if lce else {"root"})
    if os.environ.get("SUBM_SECURE_LCE") == "1" and not lce:
        skip_without_container_executor("tasks as their users: without it the rig's NodeManagers run every "
                                        "task as themselves, root, not as alice; the rest of the test passed")


def on_the_linux_container_executor(conf_dir: str) -> bool:
    """Whether the rig's NodeManagers (node<i>/conf beside ``conf_dir``) run the LCE."""
    sites = list(Path(conf_dir).parent.glob("node*/conf/yarn-site.xml"))
    return bool(sites) and all("LinuxContainerExecutor" in site.read_text() for site in sites)


#: Why the rig's NodeManagers serve no log file in secure mode.
NO_NATIVE_IO = ("the rig's NodeManagers serve no log file in secure mode: Hadoop's SecureIOUtils needs its native "
                "library (libhadoop.so), which the rig's Hadoop lacks (NM log: 'Secure IO is not possible without "
                "native code extensions'); the listing comes, the files answer 500")


@pytest.mark.secure
def test_alices_logs_come_from_the_nodemanagers_through_spnego(users):
    alice = users("alice")
    code, out, err = alice.subm("run", alice.job_file(), "-o", "json")
    assert code == 0, err
    code, logs, err = alice.subm("logs", json.loads(out)["app_id"], "--role", "worker")
    if "refused to serve" in err:  # the rig's NodeManagers: one line saying so and what it means
        assert code == 1 and err.strip().count("\n") == 0, err
        assert "Error: the NodeManager at nm" in err and "(HTTP 500: " in err and "libhadoop.so" in err, err
        pytest.xfail(NO_NATIVE_IO)
    assert code == 0 and "task runs as" in logs, err


@pytest.mark.secure
def test_alice_runs_a_job_with_a_keytab_and_no_ticket(users):
    alice = users("alice", with_ticket=False)
    code, out, err = alice.subm("run", alice.job_file(), "-o", "json", "--principal", "alice",
                                "--keytab", str(KEYTABS / "alice.keytab"))
    assert code == 0, err
    report = json.loads(out)
    assert report["state"] == "SUCCEEDED" and users("alice").rm_app(report["app_id"])["user"] == "alice"
    # Every command that talks to the cluster logs in the same way, still with no ticket cache.
    code, out, err = alice.subm("status", report["app_id"], "-o", "json", "--principal", "alice",
                                "--keytab", str(KEYTABS / "alice.keytab"))
    assert code == 0 and json.loads(out)["state"] == "SUCCEEDED", err
    assert alice.run(["klist"]).returncode != 0  # (the login's ticket is subm's own, under SUBM_HOME)


@pytest.mark.secure
def test_no_ticket_stops_subm_run_and_status_with_one_line(users):
    alice = users("alice", with_ticket=False)
    code, out, err = alice.subm("run", alice.job_file())
    assert code == 2 and err.strip().count("\n") == 0 and "run `kinit`" in err, err
    code, out, err = alice.subm("list", "--backend", "yarn")
    assert code == 2 and "no Kerberos ticket" in err, err



@pytest.mark.secure
def test_an_expired_ticket_says_so_and_what_to_run(users):
    alice = users("alice", with_ticket=False)
    alice.run(["kinit", "-l", "5s", "-kt", str(KEYTABS / "alice.keytab"), "alice"], check=True)
    time.sleep(6)
    code, out, err = alice.subm("list", "--backend", "yarn")
    assert code == 2 and err.strip().count("\n") == 0, err
    assert "the Kerberos ticket of alice@RIG.TEST expired at" in err and "run `kinit alice@RIG.TEST`" in err


@pytest.mark.secure
def test_bob_cannot_kill_alices_job_and_alice_can(users):
    alice, bob = users("alice"), users("bob")
    code, app_id, err = alice.subm("run", alice.job_file(roles={"worker": {
        "resources": {"memory": "256 MiB"}, "command": "sleep 300"}}), "--detach")
    assert code == 0, err
    app_id = app_id.strip()
    try:
        code, out, err = bob.subm("kill", app_id)
        assert code == 1, (out, err)
        assert err.strip().count("\n") == 0 and "modify ACL" in err and "bob" in err, err
        # Nor see it: the RM's reduced record is refused, not printed as the job's.
        for command in (["status", app_id], ["logs", app_id]):
            code, out, err = bob.subm(*command)
            assert code == 1 and out == "", (command, out, err)
            assert err.strip().count("\n") == 0, err
            assert f"bob may not view {app_id} (owner alice): bob is not in the job's view ACL (acls.view" in err
        code, out, err = alice.subm("kill", app_id, "-o", "json")
        assert code == 0 and json.loads(out)["state"] == "KILLED", err
    finally:
        alice.subm("kill", app_id)


@pytest.mark.secure
def test_a_modify_acl_lets_bob_kill_alices_job(users):
    alice, bob = users("alice"), users("bob")
    code, app_id, err = alice.subm("run", alice.job_file(acls={"view": ["bob"], "modify": ["bob"]}, roles={
        "worker": {"resources": {"memory": "256 MiB"}, "command": "sleep 300"}}), "--detach")
    assert code == 0, err
    app_id = app_id.strip()
    try:
        code, out, err = bob.subm("status", app_id, "-o", "json")  # acls.view names bob
        assert code == 0 and json.loads(out)["state"] in ("ACCEPTED", "RUNNING"), err
        code, out, err = bob.subm("kill", app_id, "-o", "json")
        assert code == 0 and json.loads(out)["state"] == "KILLED", err
    finally:
        alice.subm("kill", app_id)


@pytest.mark.secure
@pytest.mark.skipif(os.environ.get("SUBM_SECURE_LONG") != "1",
                    reason="6-7 minutes: set SUBM_SECURE_LONG=1 on a rig with 5-minute tickets and tokens "
                           "(scripts/with-secure-rig.sh)")
def test_a_job_outlives_a_five_minute_ticket_and_token(users, rig):
    """On the rig kinit's ticket lasts 5 minutes, and the RM refuses a delegation token 5 minutes
    after it issued it. The job's one task fails once past both (its container gone with it, so
    the restart is a new gang that goes through admission, which needs the RM's REST and the
    token): the AM says once it can no longer read the cluster's room and admits the gang
    without it; the job succeeds with 2 attempts, and `subm run` follows it to the end."""
    alice = users("alice")
    marker = alice.shared / "failed-once"
    past_token = int(time.time()) + 330  # the token was issued at submission, a moment later
    command = (f"if [ ! -e {marker} ]; then touch {marker}; while [ $(date +%s) -lt {past_token} ]; do sleep 5; "
               "done; echo failing past the token; kill -9 $PPID; exit 3; fi; echo second attempt runs")
    started = time.monotonic()
    code, out, err = alice.subm("run", alice.job_file(restart={"policy": "gang", "max_restarts": 1}, roles={
        "worker": {"resources": {"memory": "256 MiB"}, "command": command}}), "-o", "json", timeout=600)
    took = time.monotonic() - started
    assert code == 0, err
    assert json.loads(out)["state"] == "SUCCEEDED" and took > 330, (took, out)
    # The AM's report and log, read where the NodeManager keeps them (the rig's NMs serve no log
    # file, see the logs test, so `subm run` ends with YARN's record alone there).
    [am_dir] = [p.parent for p in Path(rig).parent.glob(f"node*/nm-logs/{json.loads(out)['app_id']}/*/subm-report.json")]
    report = json.loads((am_dir / "subm-report.json").read_text())
    assert report["state"] == "SUCCEEDED" and report["attempts"] == 2, report
    admitted = [e["message"] for e in report["events"] if e["message"].startswith("the gang fits")]
    assert len(admitted) == 2, report["events"]  # the restart went through admission
    said = (am_dir / "application.driver.log").read_text()
    assert said.count("cannot read the cluster's room any more") == 1, said[-3000:]
    # Hadoop 3.1: "token (RM_DELEGATION_TOKEN ...) is expired"; 3.4: "Token has expired".
    assert "refused this application's delegation token" in said, said[-3000:]
    assert "is expired" in said or "Token has expired" in said, said[-3000:]


@pytest.mark.unit
def test_a_secure_clusters_gang_is_asked_for_by_its_am_not_with_the_application(tmp_path, monkeypatch):
    """Executors of containers declared with the application find their AM through the RM's web
    proxy, which asks for SPNEGO, and a container holds no ticket: on the Kerberized rig such a
    gang never registered. On a secure cluster the AM asks for every container itself."""
    from submarine_py.backends.yarn.client.backend import YarnBackend

    monkeypatch.setenv("HADOOP_CONF_DIR", secure_conf_dir(tmp_path))
    backend = YarnBackend.__new__(YarnBackend)  # nothing of it is asked: not even the RM
    assert backend._gang_with_application(None, now=0.0) is False
