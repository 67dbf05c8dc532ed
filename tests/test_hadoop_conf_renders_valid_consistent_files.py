"""Example Hadoop configuration for GPUs + Docker on YARN 3.1+ (`subm hadoop-conf`).

The templates render to well-formed XML and a container-executor.cfg whose
sections and keys agree with yarn-site.xml; the admin's values are checked
before anything is written, every problem named by its key.
"""
import configparser
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from submarine_py.errors import SpecError
from submarine_py.hadoopconf import DEFAULTS, FILES, mount_warnings, render_hadoop_conf, write_hadoop_conf

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
#: The jars the checks below read (Apache's artifacts, as Maven Central names them).
JARS = ("hadoop-yarn-common-{v}.jar", "hadoop-yarn-server-nodemanager-{v}.jar")


def props(xml_text: str) -> dict:
    """The <property> name -> value pairs of a Hadoop XML file (parsing proves it well-formed)."""
    root = ET.fromstring(xml_text.encode())
    assert root.tag == "configuration"
    return {p.findtext("name"): p.findtext("value") or "" for p in root.findall("property")}


def cfg(text: str) -> configparser.ConfigParser:
    """container-executor.cfg read as INI; its top-level keys land in section [top]."""
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str
    parser.read_string("[top]\n" + text)
    return parser


def test_defaults_render_the_four_files_as_well_formed_configuration():
    files = render_hadoop_conf()
    assert list(files) == list(FILES) == ["yarn-site.xml", "resource-types.xml",
                                          "capacity-scheduler.xml", "container-executor.cfg"]
    for name in FILES:
        if name.endswith(".xml"):
            props(files[name])


def test_yarn_site_enables_gpus_docker_and_the_linux_container_executor():
    site = props(render_hadoop_conf()["yarn-site.xml"])
    assert site["yarn.nodemanager.resource-plugins"] == "yarn.io/gpu"
    assert site["yarn.nodemanager.resource-plugins.gpu.allowed-gpu-devices"] == "auto"
    assert site["yarn.nodemanager.resource-plugins.gpu.docker-plugin"] == "nvidia-docker-v1"
    assert site["yarn.nodemanager.container-executor.class"].endswith(".LinuxContainerExecutor")
    assert site["yarn.nodemanager.linux-container-executor.resources-handler.class"].endswith(
        ".CgroupsLCEResourcesHandler")
    assert site["yarn.nodemanager.linux-container-executor.group"] == "hadoop"
    assert site["yarn.nodemanager.linux-container-executor.path"] == "/opt/hadoop/bin/container-executor"
    assert site["yarn.nodemanager.runtime.linux.allowed-runtimes"] == "default,docker"
    assert site["yarn.nodemanager.runtime.linux.docker.allowed-container-networks"] == "host,bridge,none"
    assert site["yarn.nodemanager.runtime.linux.docker.default-container-network"] == "host"
    assert site["yarn.nodemanager.runtime.linux.docker.privileged-containers.allowed"] == "false"
    assert site["yarn.nodemanager.runtime.linux.docker.delayed-removal.allowed"] == "true"
    assert site["yarn.nodemanager.delete.debug-delay-sec"] == "600"
    assert site["yarn.nodemanager.resource.memory-mb"] == "65536"
    assert site["yarn.nodemanager.resource.cpu-vcores"] == "16"


def test_resource_types_and_the_dominant_resource_calculator():
    files = render_hadoop_conf()
    assert props(files["resource-types.xml"]) == {"yarn.resource-types": "yarn.io/gpu"}
    cs = props(files["capacity-scheduler.xml"])
    assert cs["yarn.scheduler.capacity.resource-calculator"] == \
        "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator"
    assert cs["yarn.scheduler.capacity.root.queues"] == "default"
    assert cs["yarn.scheduler.capacity.root.default.capacity"] == "100"
    assert cs["yarn.scheduler.capacity.root.default.state"] == "RUNNING"


def test_container_executor_cfg_has_docker_gpu_and_cgroups_sections():
    ce = cfg(render_hadoop_conf()["container-executor.cfg"])
    assert ce.sections() == ["top", "docker", "gpu", "cgroups"]
    assert dict(ce["top"]) == {"yarn.nodemanager.linux-container-executor.group": "hadoop",
                               "banned.users": "yarn,mapred,hdfs,bin", "min.user.id": "1000",
                               "feature.tc.enabled": "false", "feature.mount-cgroup.enabled": "0"}
    docker = ce["docker"]
    assert docker["module.enabled"] == "true"
    assert docker["docker.binary"] == "/usr/bin/docker"
    assert docker["docker.allowed.networks"] == "host,bridge,none"
    # 3.1.1 trusts "<registry>/..." only: "library" would not trust bare names, so it is not a default.
    assert docker["docker.trusted.registries"] == "localhost"
    assert docker["docker.privileged-containers.enabled"] == "false"
    assert docker["docker.allowed.ro-mounts"] == "/etc/passwd,/etc/group,/sys/fs/cgroup"
    assert docker["docker.allowed.volume-drivers"] == "nvidia-docker"
    assert "/dev/nvidiactl" in docker["docker.allowed.devices"].split(",")
    assert ce["gpu"]["module.enabled"] == "true"
    assert dict(ce["cgroups"]) == {"root": "/sys/fs/cgroup", "yarn-hierarchy": "hadoop-yarn"}


def test_both_files_agree_where_hadoop_needs_them_to():
    files = render_hadoop_conf({"nm_local_dirs": "/data1/yarn,/data2/yarn", "nm_log_dirs": ["/data1/logs"],
                                "rw_mounts": ["/scratch"], "container_executor_group": "yarn",
                                "cgroups_hierarchy": "/yarn/"})
    site, ce = props(files["yarn-site.xml"]), cfg(files["container-executor.cfg"])
    # The NodeManager mounts every container's work and log folders: they must be allowed read-write.
    assert ce["docker"]["docker.allowed.rw-mounts"] == "/data1/yarn,/data2/yarn,/data1/logs,/scratch"
    assert site["yarn.nodemanager.local-dirs"] == "/data1/yarn,/data2/yarn"
    assert site["yarn.nodemanager.linux-container-executor.group"] == \
        ce["top"]["yarn.nodemanager.linux-container-executor.group"] == "yarn"
    assert site["yarn.nodemanager.runtime.linux.docker.allowed-container-networks"] == \
        ce["docker"]["docker.allowed.networks"]
    assert set(site["yarn.nodemanager.runtime.linux.docker.capabilities"].split(",")) <= \
        set(ce["docker"]["docker.allowed.capabilities"].split(","))
    assert site["yarn.nodemanager.linux-container-executor.cgroups.hierarchy"] == \
        ce["cgroups"]["yarn-hierarchy"] == "yarn"
    assert site["yarn.nodemanager.linux-container-executor.cgroups.mount-path"] == ce["cgroups"]["root"]


@pytest.mark.parametrize("mount", [False, True, "false", "true"])
def test_cgroup_mounting_is_asked_in_yarn_site_only_where_container_executor_allows_it(mount):
    """cgroups.mount=true needs feature.mount-cgroup.enabled=1 (off by default in 3.1.1); the
    default premounts the controllers and mounts nothing."""
    files = render_hadoop_conf({"cgroups_mount": mount})
    site, ce = props(files["yarn-site.xml"]), cfg(files["container-executor.cfg"])
    wanted = mount in (True, "true")
    assert site["yarn.nodemanager.linux-container-executor.cgroups.mount"] == ("true" if wanted else "false")
    assert ce["top"]["feature.mount-cgroup.enabled"] == ("1" if wanted else "0")


def test_the_default_is_premounted_cgroups_and_the_readme_says_what_to_create():
    assert DEFAULTS["cgroups_mount"] is False
    readme = (REPO / "hadoop-conf" / "README.md").read_text()
    assert "Cannot create yarn cgroup Subsystem:cpu" in readme
    assert "chown -R yarn:hadoop /sys/fs/cgroup/$c/hadoop-yarn" in readme


def test_gpu_less_nodes_leave_the_gpu_plugin_out():
    files = render_hadoop_conf({"gpu_plugin": "false"})
    site, ce = props(files["yarn-site.xml"]), cfg(files["container-executor.cfg"])
    assert not any(name.startswith("yarn.nodemanager.resource-plugins") for name in site)
    assert ce["gpu"]["module.enabled"] == "false"
    assert "docker.allowed.volume-drivers" not in ce["docker"]
    assert "docker.allowed.runtimes" not in ce["docker"]
    # Still a Docker node, still offering yarn.io/gpu (0 of it) to the scheduler.
    assert ce["docker"]["module.enabled"] == "true"
    assert "yarn.io/gpu" in files["resource-types.xml"]
    with pytest.raises(SpecError) as err:
        render_hadoop_conf({"gpu_plugin": "maybe"})
    assert err.value.problems == [("gpu_plugin", "expected true or false, got 'maybe'")]


def test_the_readme_quotes_hadoop_3_1_1s_own_error_for_a_gpu_plugin_without_gpus():
    readme = (REPO / "hadoop-conf" / "README.md").read_text()
    assert ("yarn.nodemanager.resource-plugins.gpu.allowed-gpu-devices is set to auto, however automatically "
            "discovering GPU information failed") in readme
    assert "--set gpu_plugin=false" in readme


def test_missing_mount_roots_are_warned_about():
    present = {"/etc/passwd", "/etc/group", "/sys/fs/cgroup"}
    assert mount_warnings(exists=present.__contains__) == []
    warnings = mount_warnings({"ro_mounts": "/etc/passwd,/datasets", "rw_mounts": "/scratch"},
                              exists=present.__contains__)
    assert [w.split(" ")[:2] for w in warnings] == [["ro_mounts:", "/datasets"], ["rw_mounts:", "/scratch"]]
    assert all("exit code 29" in w for w in warnings)


def test_the_readme_example_lists_only_mount_roots_every_linux_host_has():
    readme = (REPO / "hadoop-conf" / "README.md").read_text()
    example = readme[readme.index("subm hadoop-conf ./my-conf"):readme.index("```", readme.index("subm hadoop-conf"))]
    values = dict(line.strip().rstrip("\\").strip().split("=", 1)
                  for line in example.split("--set ")[1:])
    assert mount_warnings({k: values[k] for k in ("ro_mounts", "rw_mounts") if k in values},
                          exists={"/etc/passwd", "/etc/group", "/sys/fs/cgroup"}.__contains__) == []
    assert "library" not in values["trusted_registries"]


def test_the_nodemanager_user_is_not_told_to_join_the_docker_group():
    readme = (REPO / "hadoop-conf" / "README.md").read_text()
    assert "does **not** need the `docker` group" in readme
    assert "allowed to run `docker`" not in readme


def test_custom_values_reach_the_files():
    files = render_hadoop_conf({
        "trusted_registries": ["registry.example.com:5000", "localhost"],
        "ro_mounts": "/datasets, /etc/passwd",
        "gpus_allowed": "0:0,1:1",
        "memory_mb": "131072", "vcores": 32, "min_user_id": 500,
        "docker_binary": "/usr/local/bin/docker",
        "resourcemanager_hostname": "rm1.example.com",
        "nvidia_driver_version": "535.104.05",
        "nvidia_smi_path": "/usr/bin/nvidia-smi",
    })
    site, ce = props(files["yarn-site.xml"]), cfg(files["container-executor.cfg"])
    assert ce["docker"]["docker.trusted.registries"] == "registry.example.com:5000,localhost"
    assert ce["docker"]["docker.allowed.ro-mounts"] == "/datasets,/etc/passwd,nvidia_driver_535.104.05"
    assert ce["docker"]["docker.binary"] == "/usr/local/bin/docker"
    assert ce["top"]["min.user.id"] == "500"
    assert site["yarn.nodemanager.resource-plugins.gpu.allowed-gpu-devices"] == "0:0,1:1"
    assert site["yarn.nodemanager.resource.memory-mb"] == site["yarn.scheduler.maximum-allocation-mb"] == "131072"
    assert site["yarn.nodemanager.resource.cpu-vcores"] == "32"
    assert site["yarn.resourcemanager.hostname"] == "rm1.example.com"
    assert site["yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables"] == "/usr/bin/nvidia-smi"


def test_nvidia_docker_v2_uses_the_nvidia_runtime_instead_of_the_v1_volume_driver():
    files = render_hadoop_conf({"gpu_docker_plugin": "nvidia-docker-v2"})
    site, ce = props(files["yarn-site.xml"]), cfg(files["container-executor.cfg"])
    assert site["yarn.nodemanager.resource-plugins.gpu.docker-plugin"] == "nvidia-docker-v2"
    assert not any("nvidia-docker-v1" in name for name in site)
    assert ce["docker"]["docker.allowed.runtimes"] == "nvidia"
    assert "docker.allowed.volume-drivers" not in ce["docker"]


@pytest.mark.parametrize("values, key, message", [
    ({"trusted_registries": ["localhost", "registry.example.com/team"]}, "trusted_registries[1]", "without '/'"),
    ({"trusted_registries": []}, "trusted_registries", "must not be empty"),
    ({"ro_mounts": ["data"]}, "ro_mounts[0]", "must be an absolute path"),
    ({"ro_mounts": ["/"]}, "ro_mounts[0]", "whole host filesystem"),
    ({"rw_mounts": ["/etc"]}, "rw_mounts[0]", "must not be mounted read-write"),
    ({"rw_mounts": ["/data/../etc"]}, "rw_mounts[0]", "normalized"),
    ({"nm_local_dirs": ["/a,b"]}, "nm_local_dirs[0]", "no commas"),
    ({"nm_log_dirs": []}, "nm_log_dirs", "must not be empty"),
    ({"gpus_allowed": "all"}, "gpus_allowed", "'auto' or index:minor"),
    ({"gpu_docker_plugin": "nvidia-container-toolkit"}, "gpu_docker_plugin", "nvidia-docker-v1, nvidia-docker-v2"),
    ({"docker_binary": "docker"}, "docker_binary", "absolute path"),
    ({"docker_devices": ["/tmp/nvidia0"]}, "docker_devices[0]", "under /dev/"),
    ({"docker_default_network": "calico"}, "docker_default_network", "must be one of docker_networks"),
    ({"container_executor_group": "Hadoop Users"}, "container_executor_group", "Unix group name"),
    ({"memory_mb": 0}, "memory_mb", "integer >= 1"),
    ({"vcores": "many"}, "vcores", "integer >= 1"),
    ({"min_user_id": True}, "min_user_id", "integer >= 0"),
    ({"resourcemanager_hostname": "rm host"}, "resourcemanager_hostname", "host name"),
    ({"nvidia_driver_version": "latest"}, "nvidia_driver_version", "driver version"),
    ({"trusted_registry": ["localhost"]}, "trusted_registry", "unknown setting"),
])
def test_bad_values_are_refused_naming_the_key(values, key, message):
    with pytest.raises(SpecError) as err:
        render_hadoop_conf(values)
    assert [path for path, _ in err.value.problems] == [key]
    assert message in err.value.problems[0][1]
    assert str(err.value).startswith(f"{key}: ")


def test_every_problem_is_reported_at_once():
    with pytest.raises(SpecError) as err:
        render_hadoop_conf({"ro_mounts": ["rel"], "memory_mb": -1, "nm_local_dirs": "/ok,also-rel"})
    assert [path for path, _ in err.value.problems] == ["ro_mounts[0]", "nm_local_dirs[1]", "memory_mb"]


def test_values_cannot_inject_xml_or_extra_cfg_lines():
    with pytest.raises(SpecError):
        render_hadoop_conf({"nm_local_dirs": ["/data</value><value>x"]})
    with pytest.raises(SpecError):
        render_hadoop_conf({"docker_binary": "/usr/bin/docker\ndocker.privileged-containers.enabled=true"})


def test_write_refuses_to_overwrite_without_force(tmp_path):
    out = tmp_path / "conf"
    written = write_hadoop_conf(str(out), {"memory_mb": 1024})
    assert sorted(os.path.basename(p) for p in written) == sorted(FILES)
    (out / "yarn-site.xml").write_text("mine")
    with pytest.raises(SpecError, match="already exists"):
        write_hadoop_conf(str(out))
    assert (out / "yarn-site.xml").read_text() == "mine"
    write_hadoop_conf(str(out), force=True)
    assert props((out / "yarn-site.xml").read_text())["yarn.nodemanager.resource.memory-mb"] == "65536"


def test_the_committed_example_files_are_the_defaults_rendered():
    """hadoop-conf/ must not drift from the templates: re-render with `subm hadoop-conf --force`."""
    for name, text in render_hadoop_conf().items():
        assert (REPO / "hadoop-conf" / name).read_text() == text, name
    assert set(DEFAULTS) <= set((REPO / "hadoop-conf" / "README.md").read_text().replace("`", " ").split())


def test_every_yarn_site_property_exists_in_hadoop_3_1_1(hadoop_311):
    """A misspelt property is silently ignored by Hadoop; check the names against yarn-default.xml."""
    with zipfile.ZipFile(hadoop_311 / "hadoop-yarn-common-3.1.1.jar") as jar:
        known = set(props(jar.read("yarn-default.xml").decode()))
    for values in ({}, {"nvidia_smi_path": "/usr/bin/nvidia-smi"}, {"gpu_docker_plugin": "nvidia-docker-v2"},
                   {"gpu_plugin": False, "cgroups_mount": True}):
        files = render_hadoop_conf(values)
        names = set(props(files["yarn-site.xml"])) | set(props(files["resource-types.xml"]))
        assert names - known == set()


NM_GPU = "org/apache/hadoop/yarn/server/nodemanager/containermanager/resourceplugin/gpu/"


def _classes(home: Path, version: str) -> set:
    with zipfile.ZipFile(home / f"hadoop-yarn-server-nodemanager-{version}.jar") as jar:
        return set(jar.namelist())


def test_every_yarn_site_property_and_both_gpu_docker_plugins_exist_in_hadoop_3_1_2(hadoop_312):
    with zipfile.ZipFile(hadoop_312 / "hadoop-yarn-common-3.1.2.jar") as jar:
        known = set(props(jar.read("yarn-default.xml").decode()))
    for values in ({}, {"gpu_docker_plugin": "nvidia-docker-v2"}, {"gpu_plugin": False}):
        assert set(props(render_hadoop_conf(values)["yarn-site.xml"])) - known == set()
    classes = _classes(hadoop_312, "3.1.2")
    assert {NM_GPU + "NvidiaDockerV1CommandPlugin.class", NM_GPU + "NvidiaDockerV2CommandPlugin.class"} <= classes


def hadoop(version: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding :data:`JARS` of Hadoop ``version``: the project rig's (scripts/rig.sh
    keeps each version it ran in ``~/.cache/subm-rig/hadoop-<version>/lib``), else the two jars
    fetched from Maven Central by Maven (seconds once in ``~/.m2``), so a fresh machine checks them too."""
    cache = Path(os.environ.get("SUBM_RIG_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                 / "subm-rig") / f"hadoop-{version}" / "lib"
    if all((cache / jar.format(v=version)).exists() for jar in JARS):
        return cache
    if not shutil.which("mvn"):
        pytest.skip(f"needs Hadoop {version}'s jars: {cache}, or Maven to fetch them")
    out = tmp_path_factory.mktemp(f"hadoop-{version}")
    for jar in JARS:
        artifact = jar.format(v=version)[: -len(f"-{version}.jar")]
        subprocess.run(["mvn", "-B", "-q", "dependency:copy", f"-Dartifact=org.apache.hadoop:{artifact}:{version}",
                        f"-DoutputDirectory={out}"], check=True, cwd=out, capture_output=True, timeout=300)
    return out


@pytest.fixture(scope="module")
def hadoop_311(tmp_path_factory) -> Path:
    return hadoop("3.1.1", tmp_path_factory)


@pytest.fixture(scope="module")
def hadoop_312(tmp_path_factory) -> Path:
    return hadoop("3.1.2", tmp_path_factory)


def test_hadoop_3_1_1_knows_only_nvidia_docker_v1(hadoop_311):
    classes = _classes(hadoop_311, "3.1.1")
    assert NM_GPU + "NvidiaDockerV1CommandPlugin.class" in classes
    assert NM_GPU + "NvidiaDockerV2CommandPlugin.class" not in classes


def test_gpus_in_docker_v1_pass_devices_the_driver_volume_and_isolate_in_yarns_cgroup():
    """Hadoop 3.1's UsingGpus: the GPU module of container-executor writes the devices cgroup under
    YARN's hierarchy; nvidia-docker-plugin's devices, volume driver and driver volume must be allowed."""
    files = render_hadoop_conf({"nvidia_driver_version": "535.104.05"})
    site, ce = props(files["yarn-site.xml"]), cfg(files["container-executor.cfg"])
    assert site["yarn.nodemanager.resource-plugins"] == "yarn.io/gpu"
    assert site["yarn.nodemanager.resource-plugins.gpu.docker-plugin.nvidia-docker-v1.endpoint"] == \
        "http://localhost:3476/v1.0/docker/cli"
    assert ce["gpu"]["module.enabled"] == "true"
    assert ce["cgroups"]["root"] == site["yarn.nodemanager.linux-container-executor.cgroups.mount-path"]
    assert ce["cgroups"]["yarn-hierarchy"] == site["yarn.nodemanager.linux-container-executor.cgroups.hierarchy"]
    devices = ce["docker"]["docker.allowed.devices"].split(",")
    assert {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0"} <= set(devices)
    assert ce["docker"]["docker.allowed.volume-drivers"] == "nvidia-docker"
    assert "nvidia_driver_535.104.05" in ce["docker"]["docker.allowed.ro-mounts"].split(",")


def test_empty_lists_leave_their_line_out_rather_than_allow_nothing_by_accident():
    ce = cfg(render_hadoop_conf({"ro_mounts": "", "docker_devices": [], "banned_users": ""})["container-executor.cfg"])
    assert "docker.allowed.ro-mounts" not in ce["docker"]
    assert "docker.allowed.devices" not in ce["docker"]
    assert "banned.users" not in ce["top"]


#: The values hadoop-conf/ha-tls/ is rendered with (its README says so).
HA_TLS = {"resourcemanager_ha_hosts": "rm1.example.com,rm2.example.com",
          "zookeeper_quorum": "zk1.example.com:2181,zk2.example.com:2181,zk3.example.com:2181", "https": "true"}


def test_an_ha_and_tls_example_is_what_subm_reads_as_every_rm_over_https(tmp_path):
    from submarine_py.backends.yarn.hadoop import addresses

    files = render_hadoop_conf(HA_TLS)
    assert set(files) == set(FILES) | {"ssl-server.xml", "ssl-client.xml"}
    site = props(files["yarn-site.xml"])
    assert site["yarn.resourcemanager.ha.rm-ids"] == "rm1,rm2" and site["yarn.http.policy"] == "HTTPS_ONLY"
    assert site["hadoop.zk.address"] == site["yarn.resourcemanager.zk-address"] == HA_TLS["zookeeper_quorum"]
    assert site["yarn.resourcemanager.work-preserving-recovery.enabled"] == "true"
    assert addresses.rm_urls_of(site) == ("https://rm1.example.com:8090", "https://rm2.example.com:8090")
    assert props(files["ssl-client.xml"])["ssl.client.truststore.location"] == "/etc/security/ssl/truststore.jks"
    shipped = REPO / "hadoop-conf" / "ha-tls"
    assert {p.name: p.read_text() for p in shipped.glob("*") if p.name != "README.md"} == files, \
        "hadoop-conf/ha-tls/ differs from its rendering: subm hadoop-conf hadoop-conf/ha-tls --force --set ..."


def test_ha_needs_two_hosts_and_a_zookeeper():
    with pytest.raises(SpecError) as one:
        render_hadoop_conf({"resourcemanager_ha_hosts": "rm1"})
    assert "resourcemanager_ha_hosts: HA needs two or more" in str(one.value)
    with pytest.raises(SpecError) as no_zk:
        render_hadoop_conf({"resourcemanager_ha_hosts": "rm1,rm2"})
    assert "zookeeper_quorum: ResourceManager HA elects" in str(no_zk.value)
