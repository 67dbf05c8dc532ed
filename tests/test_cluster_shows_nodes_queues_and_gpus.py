"""``subm cluster``: YARN's nodes and queues (shaped from the RM's REST answers), this
machine's GPUs through NVML, and how both look to people and scripts."""
import json

import pytest
from click.testing import CliRunner

from submarine_py.cli import main
from submarine_py.cluster import format_cluster, local_machine, yarn_cluster

from conftest import YARN_CONF_DIR, run_json


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


@pytest.mark.yarn
def test_the_real_cluster_shows_its_nodes_and_gpus(monkeypatch):
    monkeypatch.setenv("HADOOP_CONF_DIR", YARN_CONF_DIR)
    rc, info, err = run_json("cluster", env={"HADOOP_CONF_DIR": YARN_CONF_DIR})
    assert rc == 0, err
    running = [n for n in info["nodes"] if n["state"] == "RUNNING"]
    assert running and info["totals"]["nodes"] == len(running)
    for n in running:
        assert n["memory_mb"]["total"] == n["memory_mb"]["used"] + n["memory_mb"]["free"] > 0
        assert n["vcores"]["total"] > 0
        if info["gpu_scheduling"]:
            assert n["gpus"]["total"] == n["gpus"]["used"] + n["gpus"]["free"]
    assert any(q["leaf"] for q in info["queues"])
