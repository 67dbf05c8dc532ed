"""``subm cluster``: YARN's nodes and queues (shaped from the RM's REST answers), this
machine's GPUs through NVML, and how both look to people and scripts."""
import json
import re
from pathlib import Path
from typing import Any, Dict, Optional
from xml.etree import ElementTree

import pytest
import requests
from click.testing import CliRunner

from submarine_py.cli import main
from submarine_py.cluster import format_cluster, local_machine, yarn_cluster

from conftest import YARN_CONF_DIR, require_yarn, run_json, subm, wait_for, write_job


def resources(mem, vcores, gpus=None):
    infos = [{"name": "memory-mb", "value": mem}, {"name": "vcores", "value": vcores}]
    if gpus is not None:
        infos.append({"name": "yarn.io/gpu", "value": gpus})
    return {"memory": mem, "vCores": vcores, "resourceInformations": {"resourceInformation": infos}}


NODES = [
    {"nodeHostName": "gpu-2", "id": "gpu-2:4545", "state": "RUNNING", "nodeLabels": ["gpu"], "numContainers": 3,
     "usedResource": resources(12288, 6, 3), "availableResource": resources(4096, 10, 1)},
    {"nodeHostName": "gpu-1", "id": "gpu-1:4545", "state": "RUNNING", "nodeLabels": ["gpu"], "numContainers": 0,
     "usedResource": resources(0, 0, 0), "availableResource": resources(16384, 16, 4)},
    {"nodeHostName": "cpu-1", "id": "cpu-1:4545", "state": "LOST", "numContainers": 0,
     "usedResource": resources(0, 0, 0), "availableResource": resources(0, 0, 0)},
]
SCHEDULER = {"scheduler": {"schedulerInfo": {"queueName": "root", "queues": {"queue": [
    {"queueName": "research", "state": "RUNNING", "capacity": 70.0, "maxCapacity": 100.0, "usedCapacity": 40.0,
     "absoluteCapacity": 70.0, "absoluteUsedCapacity": 28.0, "numApplications": 2,
     "resourcesUsed": resources(12288, 6, 3), "queues": {"queue": [
         {"queueName": "vision", "state": "RUNNING", "capacity": 50.0, "maxCapacity": 100.0, "usedCapacity": 80.0,
          "numApplications": 2, "resourcesUsed": resources(12288, 6, 3)}]}},
    {"queueName": "default", "state": "RUNNING", "capacity": 30.0, "maxCapacity": 50.0, "usedCapacity": 0.0,
     "numApplications": 0, "resourcesUsed": resources(0, 0, 0)},
]}}}}
TYPES = ["memory-mb", "vcores", "yarn.io/gpu"]


@pytest.mark.unit
def test_nodes_show_memory_vcores_and_gpus_total_used_free():
    info = yarn_cluster("http://rm:8088", NODES, SCHEDULER, TYPES)
    by_host = {n["host"]: n for n in info["nodes"]}
    assert by_host["gpu-2"]["gpus"] == {"total": 4, "used": 3, "free": 1}
    assert by_host["gpu-2"]["memory_mb"] == {"total": 16384, "used": 12288, "free": 4096}
    assert by_host["gpu-2"]["vcores"] == {"total": 16, "used": 6, "free": 10}
    assert by_host["gpu-1"]["labels"] == ["gpu"] and by_host["cpu-1"]["state"] == "LOST"
    # Totals count the running nodes only.
    assert info["totals"]["nodes"] == 2 and info["totals"]["gpus"] == {"total": 8, "used": 3, "free": 5}


@pytest.mark.unit
def test_queues_are_listed_with_their_path_capacity_and_use():
    queues = {q["path"]: q for q in yarn_cluster("http://rm:8088", NODES, SCHEDULER, TYPES)["queues"]}
    assert list(queues) == ["root.research", "root.research.vision", "root.default"]
    assert not queues["root.research"]["leaf"] and queues["root.research.vision"]["leaf"]
    assert queues["root.research.vision"]["used"] == {"memory_mb": 12288, "vcores": 6, "gpus": 3}
    assert queues["root.default"]["capacity"] == 30.0 and queues["root.default"]["max_capacity"] == 50.0


@pytest.mark.unit
def test_the_text_view_names_free_gpus_per_node():
    text = format_cluster(yarn_cluster("http://rm:8088", NODES, SCHEDULER, TYPES))
    assert "GPUs 5 free of 8" in text
    gpu2 = next(line for line in text.splitlines() if "gpu-2" in line)
    assert "3/4" in gpu2 and "12 GiB/16 GiB" in gpu2
    assert "root.research.vision" in text and "80.0%" in text


@pytest.mark.unit
def test_a_cluster_without_gpu_scheduling_says_so():
    info = yarn_cluster("http://rm:8088", NODES, SCHEDULER, ["memory-mb", "vcores"])
    assert info["gpu_scheduling"] is False and info["nodes"][0]["gpus"] is None
    assert "no GPU scheduling" in format_cluster(info)


@pytest.mark.unit
def test_this_machine_without_nvml_says_so_cleanly(monkeypatch):
    monkeypatch.delenv("SUBM_LOCAL_GPUS", raising=False)
    monkeypatch.setattr("submarine_py.gpus.nvml_gpus", lambda: None)
    info = local_machine()
    assert info["nvml"] is False and info["gpus"] == [] and info["cpus"] >= 1
    result = CliRunner().invoke(main, ["cluster", "--backend", "local"])
    assert result.exit_code == 0, result.output
    assert "GPUs: none usable: no NVIDIA driver found (NVML unavailable)" in result.output
    data = json.loads(CliRunner().invoke(main, ["cluster", "-b", "local", "-o", "json"]).output)
    assert data["backend"] == "local" and data["nvml"] is False and data["memory_mb"]["total"] > 0


@pytest.mark.unit
def test_this_machines_gpus_as_nvml_reports_them(monkeypatch):
    monkeypatch.setattr("submarine_py.gpus.nvml_gpus", lambda: [
        {"index": 0, "name": "NVIDIA H100", "memory_mb": 81559, "used_mb": 1024, "utilization": 37}])
    text = format_cluster(local_machine())
    assert "NVIDIA H100" in text and "37%" in text and "1 GiB/79.6 GiB" in text


@pytest.mark.unit
def test_an_unreachable_resource_manager_is_one_error(monkeypatch):
    monkeypatch.setenv("SUBM_YARN_RM_URL", "http://127.0.0.1:9")
    result = CliRunner().invoke(main, ["cluster", "--backend", "yarn"])
    assert result.exit_code == 1 and result.output.startswith("Error: cannot reach the YARN ResourceManager")


def rig_shape(conf_dir: str) -> Optional[Dict[str, int]]:
    """What every node of the project's rig offers, from the files scripts/rig.sh wrote beside
    the client's configuration (DIR/env.sh: RIG_NODES, RIG_GPUS; DIR/conf/yarn-site.xml: the
    NodeManagers' memory and vcores); None where ``conf_dir`` is not a rig's."""
    env_sh = Path(conf_dir).parent / "env.sh"
    if not env_sh.is_file():
        return None
    exported = dict(re.findall(r"\b(RIG_[A-Z_]+)=(\S*)", env_sh.read_text()))
    site = {p.findtext("name"): p.findtext("value")
            for p in ElementTree.parse(Path(conf_dir) / "yarn-site.xml").getroot().iter("property")}
    return {"nodes": int(exported["RIG_NODES"]), "gpus": int(exported["RIG_GPUS"]),
            "memory_mb": int(site["yarn.nodemanager.resource.memory-mb"]),
            "vcores": int(site["yarn.nodemanager.resource.cpu-vcores"])}


def rm_says(rm: str) -> Dict[str, Any]:
    """The figures the ResourceManager itself gives (its REST API, read here with requests):
    each node's used and available resources and state (/ws/v1/cluster/nodes), the cluster's
    (/ws/v1/cluster/metrics)."""
    def get(path: str) -> Dict[str, Any]:
        resp = requests.get(rm + path, headers={"Accept": "application/json"}, timeout=10)
        resp.raise_for_status()
        return resp.json()

    def values(block: Optional[Dict[str, Any]]) -> Dict[str, int]:
        infos = ((block or {}).get("resourceInformations") or {}).get("resourceInformation") or []
        return {i["name"]: int(i.get("value") or 0) for i in infos}

    nodes = {}
    for n in (get("/ws/v1/cluster/nodes").get("nodes") or {}).get("node") or []:
        used, avail = values(n.get("usedResource")), values(n.get("availableResource"))
        nodes[n["id"]] = {"host": n["nodeHostName"], "state": n["state"],
                          "used": {"memory_mb": n["usedMemoryMB"], "vcores": n["usedVirtualCores"],
                                   "gpus": used.get("yarn.io/gpu", 0)},
                          "free": {"memory_mb": n["availMemoryMB"], "vcores": n["availableVirtualCores"],
                                   "gpus": avail.get("yarn.io/gpu", 0)}}
    m = get("/ws/v1/cluster/metrics")["clusterMetrics"]
    metrics = {"nodes": m["activeNodes"],
               "memory_mb": {"total": m["totalMB"], "used": m["allocatedMB"], "free": m["availableMB"]},
               "vcores": {"total": m["totalVirtualCores"], "used": m["allocatedVirtualCores"],
                          "free": m["availableVirtualCores"]}}
    return {"nodes": nodes, "metrics": metrics}


@pytest.mark.yarn
def test_the_real_cluster_shows_its_nodes_and_gpus(tmp_path):
    """``subm cluster`` says what the ResourceManager says, node by node and in all, while a
    job holds a GPU (so that "used" is not 0 everywhere), and the rig's nodes at their full size."""
    rm = require_yarn()
    shape = rig_shape(YARN_CONF_DIR)
    if shape is None:  # (in CI a skip is a failure: it runs on the rig)
        pytest.skip(f"compares with the project's rig, and {YARN_CONF_DIR} has no env.sh beside it (scripts/rig.sh)")
    env = {"HADOOP_CONF_DIR": YARN_CONF_DIR}
    job = write_job(tmp_path, """\
        name: cluster-figures
        roles:
          worker:
            resources: {memory: 512 MiB, vcores: 1, gpus: 1}
            command: sleep 600
    """)
    rc, out, err = subm("run", str(job), "--backend", "yarn", "--detach", env=env)
    assert rc == 0, err
    app_id = out.strip()
    try:
        def both_containers() -> bool:  # the AM's and the worker's
            app = requests.get(f"{rm}/ws/v1/cluster/apps/{app_id}", timeout=10).json()["app"]
            assert app["state"] in ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING"), app
            return app.get("runningContainers", 0) >= 2
        wait_for(both_containers, timeout=180, what=f"{app_id}'s two containers", interval=0.5)

        # The figures of one moment: the RM's, read before and after subm's, until they agree.
        for _ in range(10):
            before = rm_says(rm)
            rc, info, err = run_json("cluster", env=env)
            assert rc == 0, err
            said = rm_says(rm)
            if said == before:
                break
        else:
            pytest.fail(f"the ResourceManager's figures kept changing: {before} then {said}")
    finally:
        subm("kill", app_id, env=env)

    nodes, metrics = said["nodes"], said["metrics"]
    size = {"memory_mb": shape["memory_mb"], "vcores": shape["vcores"], "gpus": shape["gpus"]}
    running = {i: n for i, n in nodes.items() if n["state"] == "RUNNING"}
    # The rig as scripts/rig.sh made it, in the RM's words: every node up, each its full size.
    assert len(running) == shape["nodes"] == metrics["nodes"], (shape, nodes, metrics)
    for node_id, n in running.items():
        assert {k: n["used"][k] + n["free"][k] for k in size} == size, (node_id, n, shape)
    assert metrics["memory_mb"]["total"] == shape["nodes"] * shape["memory_mb"], metrics
    assert metrics["vcores"]["total"] == shape["nodes"] * shape["vcores"], metrics

    # subm's figures are those, node by node (a node that is not running: what the RM has of it).
    assert info["gpu_scheduling"] is True
    expected = {}
    for node_id, n in nodes.items():
        total = size if n["state"] == "RUNNING" else {k: n["used"][k] + n["free"][k] for k in size}
        expected[node_id] = {"host": n["host"], "state": n["state"],
                             **{k: {"total": total[k], "used": n["used"][k], "free": n["free"][k]} for k in size}}
    shown = {n["id"]: {k: n[k] for k in ("host", "state", *size)} for n in info["nodes"]}
    assert shown == expected
    # and in all: the running nodes, the RM's metrics, the job's GPU among those used.
    gpus = {"total": shape["nodes"] * shape["gpus"], "used": sum(n["used"]["gpus"] for n in running.values()),
            "free": sum(n["free"]["gpus"] for n in running.values())}
    assert gpus["used"] >= 1, nodes
    assert info["totals"] == {"nodes": metrics["nodes"], "memory_mb": metrics["memory_mb"],
                              "vcores": metrics["vcores"], "gpus": gpus}
    assert any(q["leaf"] for q in info["queues"])
