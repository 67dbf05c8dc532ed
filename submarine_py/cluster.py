"""``subm cluster``: where the free GPUs are.

On YARN, the nodes (state, labels, memory, vcores and ``yarn.io/gpu``: total,
used, free) and the queues (capacity and use) from the ResourceManager's REST
answers; locally, this machine's GPUs through NVML plus its CPUs and memory.
The functions here shape and print; fetching is the backends' job.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional


GPU = "yarn.io/gpu"


def _resource_values(block: Optional[Dict[str, Any]]) -> Dict[str, int]:
    """``{name: value}`` of a YARN resource block (3.x ``resourceInformations``, else 2.x keys)."""
    block = block or {}
    infos = (block.get("resourceInformations") or {}).get("resourceInformation") or []
    out = {i["name"]: int(i.get("value") or 0) for i in infos if "name" in i}
    out.setdefault("memory-mb", int(block.get("memory") or 0))
    out.setdefault("vcores", int(block.get("vCores") or 0))
    return out


def _amounts(used: int, free: int) -> Dict[str, int]:
    return {"total": used + free, "used": used, "free": free}


def yarn_nodes(nodes: List[Dict[str, Any]], has_gpu: bool) -> List[Dict[str, Any]]:
    """One entry per NodeManager, from ``/ws/v1/cluster/nodes``; ``gpus`` is None where the
    cluster does not schedule ``yarn.io/gpu``."""
    out = []
    for n in sorted(nodes, key=lambda n: str(n.get("nodeHostName") or n.get("id"))):
        used, avail = _resource_values(n.get("usedResource")), _resource_values(n.get("availableResource"))
        mem_used = used.get("memory-mb") or int(n.get("usedMemoryMB") or 0)
        mem_free = avail.get("memory-mb") or int(n.get("availMemoryMB") or 0)
        vc_used = used.get("vcores") or int(n.get("usedVirtualCores") or 0)
        vc_free = avail.get("vcores") or int(n.get("availableVirtualCores") or 0)
        out.append({
            "host": n.get("nodeHostName"),
            "id": n.get("id"),
            "state": n.get("state"),
            "labels": list(n.get("nodeLabels") or []),
            "rack": n.get("rack"),
            "containers": int(n.get("numContainers") or 0),
            "memory_mb": _amounts(mem_used, mem_free),
            "vcores": _amounts(vc_used, vc_free),
            "gpus": _amounts(used.get(GPU, 0), avail.get(GPU, 0)) if has_gpu else None,
            "health": n.get("healthReport") or "",
        })
    return out


def yarn_queues(scheduler: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Every queue below the root of ``/ws/v1/cluster/scheduler``, depth-first, with its path."""
    info = (scheduler.get("scheduler") or {}).get("schedulerInfo") or {}
    out: List[Dict[str, Any]] = []

    def walk(q: Dict[str, Any], parent: str) -> None:
        for child in (q.get("queues") or {}).get("queue") or []:
            path = f"{parent}.{child.get('queueName')}"
            used = _resource_values(child.get("resourcesUsed"))
            leaf = not (child.get("queues") or {}).get("queue")
            out.append({
                "name": child.get("queueName"), "path": path, "leaf": leaf, "state": child.get("state"),
                # Percentages, as the scheduler gives them: capacity of the parent, and of the cluster.
                "capacity": child.get("capacity"), "max_capacity": child.get("maxCapacity"),
                "absolute_capacity": child.get("absoluteCapacity"),
                "used_capacity": child.get("usedCapacity"),
                "absolute_used_capacity": child.get("absoluteUsedCapacity"),
                "applications": child.get("numApplications"),
                "used": {"memory_mb": used.get("memory-mb", 0), "vcores": used.get("vcores", 0),
                         "gpus": used.get(GPU, 0)},
            })
            walk(child, path)

    walk(info, info.get("queueName") or "root")
    return out


def yarn_cluster(rm_url: str, nodes: List[Dict[str, Any]], scheduler: Dict[str, Any],
                 resource_types: List[str]) -> Dict[str, Any]:
    from .backends.yarn.hadoop.resourcemanager import NodeState

    has_gpu = GPU in resource_types
    shaped = yarn_nodes(nodes, has_gpu)
    running = [n for n in shaped if n["state"] == NodeState.RUNNING]

    def total(key: str) -> Optional[Dict[str, int]]:
        if key == "gpus" and not has_gpu:
            return None
        return {k: sum(n[key][k] for n in running) for k in ("total", "used", "free")}

    return {"backend": "yarn", "resource_manager": rm_url, "gpu_scheduling": has_gpu,
            "totals": {"nodes": len(running), "memory_mb": total("memory_mb"), "vcores": total("vcores"),
                       "gpus": total("gpus")},
            "nodes": shaped, "queues": yarn_queues(scheduler)}


# ------------------------------------------------------------------------- local
def _meminfo() -> Dict[str, int]:
    out = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    out[key] = int(parts[0]) // 1024  # kB -> MiB
    except OSError:
        pass
    return out


def local_machine() -> Dict[str, Any]:
    """This machine: CPUs, memory, and its GPUs through NVML (None where NVML is unavailable)."""
    from .gpus import describe_local_gpus, nvml_gpus

    mem = _meminfo()
    try:
        load: Optional[List[float]] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    gpus = nvml_gpus()
    return {"backend": "local", "host": os.uname().nodename, "cpus": os.cpu_count(), "load_average": load,
            "memory_mb": ({"total": mem["MemTotal"], "used": mem["MemTotal"] - mem.get("MemAvailable", 0),
                           "free": mem.get("MemAvailable", 0)} if "MemTotal" in mem else None),
            "nvml": gpus is not None, "gpus": gpus or [], "gpu_note": describe_local_gpus(),
            "local_gpus_override": os.environ.get("SUBM_LOCAL_GPUS") or None}


# ----------------------------------------------------------------------- output
def _table(rows: List[List[str]]) -> List[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _mem(mib: int) -> str:
    """MiB for people: ``768 MiB``, ``15.5 GiB``."""
    if mib < 1024:
        return f"{mib} MiB"
    return f"{mib / 1024:.1f}".rstrip("0").rstrip(".") + " GiB"


def _triple(a: Optional[Dict[str, int]], mem: bool = False) -> str:
    if a is None:
        return "-"
    f = _mem if mem else str
    return f"{f(a['free'])} free of {f(a['total'])}"


def format_cluster(info: Dict[str, Any]) -> str:
    if info.get("backend") == "local":
        return _format_local(info)
    t = info["totals"]
    lines = [f"YARN at {info['resource_manager']}: {t['nodes']} running node(s); "
             f"memory {_triple(t['memory_mb'], True)}, vcores {_triple(t['vcores'])}, "
             + (f"GPUs {_triple(t['gpus'])}" if info["gpu_scheduling"]
                else f"no GPU scheduling ({GPU} is not a resource type)")]
    if info["nodes"]:
        rows = [["NODE", "STATE", "LABELS", "CONTAINERS", "MEMORY USED/TOTAL", "VCORES USED/TOTAL", "GPUS USED/TOTAL",
                 "GPUS FREE"]]
        for n in info["nodes"]:
            g = n["gpus"]
            rows.append([str(n["host"]), str(n["state"]), ",".join(n["labels"]) or "-", str(n["containers"]),
                         f"{_mem(n['memory_mb']['used'])}/{_mem(n['memory_mb']['total'])}",
                         f"{n['vcores']['used']}/{n['vcores']['total']}",
                         f"{g['used']}/{g['total']}" if g else "-", str(g["free"]) if g else "-"])
        lines.append("Nodes:")
        lines += _table(rows)
    if info["queues"]:
        rows = [["QUEUE", "STATE", "CAPACITY", "MAX", "USED (OF CAPACITY)", "APPS", "MEMORY USED", "VCORES", "GPUS"]]
        for q in info["queues"]:
            rows.append([q["path"], str(q["state"] or ""), _pct(q["capacity"]), _pct(q["max_capacity"]),
                         _pct(q["used_capacity"]), str(q["applications"] if q["applications"] is not None else "-"),
                         _mem(q["used"]["memory_mb"]), str(q["used"]["vcores"]), str(q["used"]["gpus"])])
        lines.append("Queues:")
        lines += _table(rows)
    return "\n".join(lines)


def _pct(x: Any) -> str:
    return "-" if x is None else f"{float(x):.1f}%"


def _format_local(info: Dict[str, Any]) -> str:
    mem = info.get("memory_mb")
    load = info.get("load_average")
    lines = [f"This machine ({info['host']}): {info['cpus']} CPUs"
             + (f", load {' '.join(str(x) for x in load)}" if load else "")
             + (f"; memory {_mem(mem['free'])} available of {_mem(mem['total'])}" if mem else "")]
    if not info["nvml"]:
        lines.append(f"GPUs: none usable: {info['gpu_note']}")
    elif not info["gpus"]:
        lines.append("GPUs: NVML works but finds no device")
    else:
        rows = [["GPU", "NAME", "MEMORY USED/TOTAL", "UTILIZATION"]]
        for g in info["gpus"]:
            util = g.get("utilization")
            rows.append([str(g["index"]), str(g["name"]),
                         f"{_mem(g['used_mb'])}/{_mem(g['memory_mb'])}",
                         "-" if util is None else f"{util}%"])
        lines.append("GPUs (NVML):")
        lines += _table(rows)
    if info.get("local_gpus_override"):
        lines.append(f"SUBM_LOCAL_GPUS={info['local_gpus_override']}: the local backend hands out these devices")
    return "\n".join(lines)
