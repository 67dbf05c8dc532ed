"""Where the cluster is: every ResourceManager's and NameNode's web address, HTTP or HTTPS, the
NodeManagers' scheme, and which certificates to trust, read from ``HADOOP_CONF_DIR`` as
Hadoop's own clients read it. The one place a URL to the cluster is built from its configuration.

- **ResourceManagers.** With ``yarn.resourcemanager.ha.enabled``, one web address per id of
  ``yarn.resourcemanager.ha.rm-ids`` (``yarn.resourcemanager.webapp[.https].address.<id>``, else
  ``yarn.resourcemanager.hostname.<id>`` and the default port); else the one. ``yarn.http.policy``
  ``HTTPS_ONLY`` makes them (and the NodeManagers, which follow the same policy) HTTPS.
  ``SUBM_YARN_RM_URL`` (comma-separated) replaces them all.
- **NameNodes.** ``fs.defaultFS=hdfs://NS`` where NS is one of ``dfs.nameservices`` (or has
  ``dfs.ha.namenodes.NS``): every NameNode of ``dfs.ha.namenodes.NS``, at
  ``dfs.namenode.http[s]-address.NS.<nn>`` (``dfs.http.policy`` ``HTTPS_ONLY``: HTTPS, WebHDFS as
  ``swebhdfs``); else the one NameNode. ``viewfs://`` is refused, naming the field.
- **Trust** (HTTPS only), the first that is set: ``SUBM_CA_BUNDLE``; the variables Python's and
  curl's clients read (``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``, ``SSL_CERT_FILE``); the
  truststore that ``ssl-client.xml`` names (``ssl.client.truststore.location``: Hadoop's own
  clients trust it), its certificates beside the system's CAs; else the system's CAs.
  A PEM file is used as it is; a JKS or PKCS12 truststore is read with Java's ``keytool`` (skein's
  driver needs Java anyway) into a PEM bundle under ``~/.cache/submarine-py/trust``.

Which master is active is the callers' business (``resourcemanager.py``, ``webhdfs.py``): this
module gives every address, in the configuration's order.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import ssl
import subprocess
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple
from urllib.parse import urlparse

import requests
from requests.adapters import HTTPAdapter

from ....errors import BackendError, SpecError, SubmarineError
from ....executor.protocol import CA_BUNDLE as CA_BUNDLE_ENV
from .conf import hadoop_conf, hadoop_conf_dir

#: The user's override of the ResourceManagers' web addresses (comma-separated URLs).
RM_URLS_ENV = "SUBM_YARN_RM_URL"
#: Where the AM reads the RMs' addresses the client found (comma-separated URLs).
AM_RM_URLS_ENV = "SUBM_RM_URL"
#: The variables other clients read for a CA bundle, after ours.
CA_BUNDLE_VARIABLES = (CA_BUNDLE_ENV, "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE")
RM_HTTP_PORT, RM_HTTPS_PORT = 8088, 8090
NN_HTTP_PORT, NN_HTTPS_PORT = 9870, 9871
#: Where the docs explain the trust decision (named in errors).
TLS_DOCS = "docs/yarn.md#tls"


@dataclass(frozen=True)
class Trust:
    """What HTTPS calls verify the cluster's certificates against: ``bundle`` (a PEM file; None:
    the system's CAs) and, in words, where it comes from (for errors)."""

    bundle: Optional[str]
    source: str


@dataclass(frozen=True)
class Addresses:
    """The cluster's masters' web addresses, as URLs without a trailing slash."""

    rm_urls: Tuple[str, ...]
    #: ``hdfs://authority`` of the default filesystem ('' where it is not HDFS: see ``fs_problem``).
    fs_uri: str
    namenode_urls: Tuple[str, ...]
    #: Why the default filesystem cannot be used through WebHDFS ('' when it can).
    fs_problem: str = ""

    @property
    def yarn_https(self) -> bool:
        return any(u.startswith("https:") for u in self.rm_urls)

    @property
    def hdfs_https(self) -> bool:
        return any(u.startswith("https:") for u in self.namenode_urls)

    def node_url(self, node_http: str) -> str:
        """A NodeManager's URL from its ``nodeHTTPAddress`` (``host:port``), by the RMs' scheme."""
        return node_url(node_http, self.yarn_https)


def node_url(node_http: str, https: bool) -> str:
    """``host:port`` as a URL: HTTPS where the cluster's YARN web endpoints are (yarn.http.policy)."""
    if node_http.startswith(("http://", "https://")):
        return node_http.rstrip("/")
    return f"{'https' if https else 'http'}://{node_http}"


def yarn_https() -> bool:
    """Whether this process's cluster serves YARN's web endpoints (RMs, NodeManagers) over HTTPS:
    in the AM, by the RMs' URLs the client passed it; elsewhere by the configuration."""
    given = os.environ.get(AM_RM_URLS_ENV) or ""
    if given:
        return "https://" in given
    try:
        return current().yarn_https
    except SubmarineError:
        return False


def nm_url(node_http: str) -> str:
    """A NodeManager's URL from its ``host:port`` (``nodeHTTPAddress``), by :func:`yarn_https`."""
    return node_url(node_http, yarn_https())


def _https(policy: str) -> bool:
    return (policy or "HTTP_ONLY").strip().upper() == "HTTPS_ONLY"


def _address(value: str, host: str, port: int) -> str:
    """``host:port`` of a configured address: a wildcard or missing host becomes ``host``."""
    value = (value or "").strip()
    if not value:
        return f"{host}:{port}"
    h, _, p = value.rpartition(":")
    if not h:  # no port given
        h, p = value, str(port)
    if h in ("0.0.0.0", "::", "[::]", ""):
        h = host
    return f"{h}:{p}"


def rm_urls_of(yarn: Dict[str, str]) -> Tuple[str, ...]:
    """Every ResourceManager's web URL, from yarn-site.xml's properties."""
    https = _https(yarn.get("yarn.http.policy", ""))
    scheme, port = ("https", RM_HTTPS_PORT) if https else ("http", RM_HTTP_PORT)
    web = "yarn.resourcemanager.webapp.https.address" if https else "yarn.resourcemanager.webapp.address"
    ids = [i.strip() for i in yarn.get("yarn.resourcemanager.ha.rm-ids", "").split(",") if i.strip()]
    if yarn.get("yarn.resourcemanager.ha.enabled", "").strip().lower() == "true" and ids:
        out = []
        for rm in ids:
            host = yarn.get(f"yarn.resourcemanager.hostname.{rm}") or yarn.get("yarn.resourcemanager.hostname")
            if not host and not yarn.get(f"{web}.{rm}"):
                raise SpecError([(f"yarn.resourcemanager.hostname.{rm}",
                                  f"yarn-site.xml names ResourceManager {rm} in yarn.resourcemanager.ha.rm-ids "
                                  f"but gives neither its host name nor {web}.{rm}")])
            out.append(f"{scheme}://{_address(yarn.get(f'{web}.{rm}', ''), host or 'localhost', port)}")
        return tuple(out)
    host = yarn.get("yarn.resourcemanager.hostname") or "localhost"
    return (f"{scheme}://{_address(yarn.get(web, ''), host, port)}",)


def namenodes_of(core: Dict[str, str], hdfs: Dict[str, str]) -> Tuple[str, Tuple[str, ...], str]:
    """``(fs_uri, NameNode web URLs, problem)`` of the default filesystem."""
    default = core.get("fs.defaultFS", "") or core.get("fs.default.name", "")
    parsed = urlparse(default)
    if parsed.scheme == "viewfs":
        return "", (), (f"the cluster's default filesystem is {default} (fs.defaultFS): a viewfs:// mount table, "
                        "which subm does not resolve for the files it uploads itself; set environment.python to an "
                        "interpreter every node has, so that the environment does not travel")
    if parsed.scheme != "hdfs" or not parsed.hostname:
        return "", (), (f"the cluster's default filesystem is {default or 'file:///'} (fs.defaultFS), not HDFS")
    return f"hdfs://{parsed.netloc}", namenode_urls(parsed.netloc, hdfs), ""


def namenode_urls(authority: str, hdfs: Dict[str, str]) -> Tuple[str, ...]:
    """The web URLs of the NameNodes behind ``hdfs://authority``: a nameservice's every NameNode,
    or the one NameNode."""
    https = _https(hdfs.get("dfs.http.policy", ""))
    scheme, port = ("https", NN_HTTPS_PORT) if https else ("http", NN_HTTP_PORT)
    web = "dfs.namenode.https-address" if https else "dfs.namenode.http-address"
    host = authority.rsplit(":", 1)[0] if ":" in authority else authority
    services = [s.strip() for s in hdfs.get("dfs.nameservices", "").split(",") if s.strip()]
    nns = [n.strip() for n in hdfs.get(f"dfs.ha.namenodes.{authority}", "").split(",") if n.strip()]
    if ":" not in authority and (authority in services or nns):
        if not nns:  # a nameservice of one NameNode (federation without HA)
            value = hdfs.get(f"{web}.{authority}") or hdfs.get(web, "")
            rpc_host = (hdfs.get(f"dfs.namenode.rpc-address.{authority}", "") or host).rsplit(":", 1)[0]
            return (f"{scheme}://{_address(value, rpc_host, port)}",)
        out = []
        for nn in nns:
            value = hdfs.get(f"{web}.{authority}.{nn}", "")
            rpc = hdfs.get(f"dfs.namenode.rpc-address.{authority}.{nn}", "")
            if not value and not rpc:
                raise SpecError([(f"{web}.{authority}.{nn}",
                                  f"hdfs-site.xml names NameNode {nn} of {authority} (dfs.ha.namenodes.{authority}) "
                                  "but gives neither its web address nor its RPC address")])
            out.append(f"{scheme}://{_address(value, rpc.rsplit(':', 1)[0] or host, port)}")
        return tuple(out)
    value = hdfs.get(web, "")
    return (f"{scheme}://{_address(value, host, port)}",)


def from_conf(conf_dir: Optional[str] = None) -> Addresses:
    """The addresses in ``conf_dir`` (default: the checked HADOOP_CONF_DIR), with the overrides."""
    conf_dir = conf_dir or hadoop_conf_dir()
    override = os.environ.get(RM_URLS_ENV, "")
    rms = from_urls(override) if override else rm_urls_of(hadoop_conf("yarn-site.xml", conf_dir))
    fs_uri, nns, problem = namenodes_of(hadoop_conf("core-site.xml", conf_dir), hadoop_conf("hdfs-site.xml", conf_dir))
    return Addresses(rm_urls=rms, fs_uri=fs_uri, namenode_urls=nns, fs_problem=problem)


def rm_address(conf_dir: Optional[str] = None) -> str:
    """The first ResourceManager's URL of ``conf_dir`` (the only one where there is no HA)."""
    return from_conf(conf_dir).rm_urls[0]


def from_urls(urls: str) -> Tuple[str, ...]:
    """Comma-separated URLs (or ``host:port``, taken as HTTP), without trailing slashes."""
    out = []
    for url in (u.strip() for u in urls.split(",")):
        if url:
            out.append((url if "://" in url else f"http://{url}").rstrip("/"))
    return tuple(out)


def current() -> Addresses:
    """The addresses of the cluster HADOOP_CONF_DIR names (only SUBM_YARN_RM_URL: no filesystem)."""
    conf_dir = os.environ.get("HADOOP_CONF_DIR") or ""
    if not conf_dir and os.environ.get(RM_URLS_ENV):
        return Addresses(rm_urls=from_urls(os.environ[RM_URLS_ENV]), fs_uri="", namenode_urls=(),
                         fs_problem="HADOOP_CONF_DIR is not set: subm does not know the cluster's filesystem")
    return _cached(hadoop_conf_dir(), os.environ.get(RM_URLS_ENV, ""))


@functools.lru_cache(maxsize=8)
def _cached(conf_dir: str, _override: str) -> Addresses:
    return from_conf(conf_dir)


# -- trust ---------------------------------------------------------------------------------
def trust(conf_dir: Optional[str] = None) -> Trust:
    """What HTTPS calls to the cluster trust (the module's docstring says the order)."""
    for var in CA_BUNDLE_VARIABLES:
        path = os.environ.get(var, "")
        if path:
            if not os.path.isfile(path):
                raise SpecError([(var, f"{path} is not a file; name a PEM file of the CA certificates to trust "
                                       f"({TLS_DOCS})")])
            return Trust(os.path.abspath(path), f"{var}={path}")
    conf_dir = conf_dir or os.environ.get("HADOOP_CONF_DIR") or ""
    client = hadoop_conf("ssl-client.xml", conf_dir) if conf_dir and os.path.isdir(conf_dir) else {}
    store = client.get("ssl.client.truststore.location", "")
    if store:
        if not os.path.isfile(store):
            raise SpecError([("ssl.client.truststore.location",
                              f"ssl-client.xml names the truststore {store}, which is not on this machine; copy it "
                              f"here or set {CA_BUNDLE_ENV} to a PEM file of the cluster's CA ({TLS_DOCS})")])
        return Trust(_truststore_bundle(store, client.get("ssl.client.truststore.password", ""),
                                        client.get("ssl.client.truststore.type", "")),
                     f"the truststore that ssl-client.xml names ({store}) and the system's CAs")
    return Trust(system_cas(), "the system's CAs")


def system_cas() -> Optional[str]:
    """The system's CA bundle (OpenSSL's default file), else None (requests' own, certifi)."""
    paths = ssl.get_default_verify_paths()
    for path in (paths.cafile, paths.openssl_cafile, "/etc/ssl/certs/ca-certificates.crt"):
        if path and os.path.isfile(path):
            return path
    return None


def _truststore_bundle(store: str, password: str, kind: str) -> str:
    """A PEM bundle of the truststore's certificates and the system's CAs (made once per
    truststore content, under ~/.cache/submarine-py/trust)."""
    with open(store, "rb") as f:
        content = f.read()
    if b"-----BEGIN CERTIFICATE-----" in content:
        pem = content.decode("ascii", "replace")
    else:
        pem = _keytool_pem(store, password, kind)
    system = system_cas()
    if system:
        with open(system, encoding="ascii", errors="replace") as f:
            pem += "\n" + f.read()
    digest = hashlib.sha256(pem.encode()).hexdigest()[:16]
    folder = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "submarine-py", "trust")
    path = os.path.join(folder, f"{digest}.pem")
    if not os.path.isfile(path):
        os.makedirs(folder, exist_ok=True)
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(pem)
        os.replace(tmp, path)
    return path


def _keytool_pem(store: str, password: str, kind: str) -> str:
    java_home = os.environ.get("JAVA_HOME", "")
    keytool = os.path.join(java_home, "bin", "keytool") if java_home else ""
    keytool = keytool if keytool and os.path.isfile(keytool) else shutil.which("keytool")
    if not keytool:
        raise SpecError([("ssl.client.truststore.location",
                          f"the truststore {store} (ssl-client.xml) is read with Java's keytool, and there is none "
                          f"(JAVA_HOME, PATH); set {CA_BUNDLE_ENV} to a PEM file of the cluster's CA ({TLS_DOCS})")])
    cmd = [keytool, "-list", "-rfc", "-keystore", store, "-storepass", password or "changeit"]
    if kind:
        cmd += ["-storetype", kind.upper()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0 or "BEGIN CERTIFICATE" not in done.stdout:
        said = " ".join((done.stdout + done.stderr).split())[:200]
        raise SpecError([("ssl.client.truststore.password",
                          f"keytool cannot read the truststore {store} that ssl-client.xml names ({said}); check "
                          f"ssl.client.truststore.password/type, or set {CA_BUNDLE_ENV} to a PEM file ({TLS_DOCS})")])
    lines, keep = [], False
    for line in done.stdout.splitlines():
        keep = keep or line.startswith("-----BEGIN CERTIFICATE-----")
        if keep:
            lines.append(line)
        if line.startswith("-----END CERTIFICATE-----"):
            keep = False
    return "\n".join(lines) + "\n"


class _Trusting(HTTPAdapter):
    """HTTPS that verifies against one bundle, whatever REQUESTS_CA_BUNDLE says (requests lets
    that variable override a session's ``verify``)."""

    def __init__(self, bundle: Optional[str]):
        super().__init__()
        self.bundle = bundle

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        if kwargs.get("verify") is not False:
            kwargs["verify"] = self.bundle or True
        return super().send(request, **kwargs)


@functools.lru_cache(maxsize=4)
def _trust_of(conf_dir: str, env: Tuple[str, ...]) -> Trust:
    return trust(conf_dir or None)


def current_trust() -> Trust:
    """:func:`trust` for this process's HADOOP_CONF_DIR and variables (computed once)."""
    return _trust_of(os.environ.get("HADOOP_CONF_DIR") or "", tuple(os.environ.get(v, "") for v in CA_BUNDLE_VARIABLES))


def prepare(session: requests.Session) -> requests.Session:
    """Make ``session``'s HTTPS calls trust what the cluster's clients trust (:func:`current_trust`)."""
    session.mount("https://", _Trusting(current_trust().bundle))
    return session


def untrusted(url: str, exc: Exception) -> Optional[BackendError]:
    """The one line for a certificate this process does not trust (None: ``exc`` is not that)."""
    text = str(exc)
    if not isinstance(exc, requests.exceptions.SSLError) and "CERTIFICATE_VERIFY_FAILED" not in text:
        return None
    why = "certificate verify failed"
    for part in text.replace("(", " (").split(" ("):
        if "certificate verify failed" in part:
            why = part.split(")")[0].strip(" '\"")
            break
    return BackendError(f"{urlparse(url).netloc} presents a certificate that no CA this machine trusts has "
                        f"signed ({why}; trusted: {current_trust().source}); set {CA_BUNDLE_ENV} to a PEM file "
                        f"of the cluster's CA ({TLS_DOCS})")

