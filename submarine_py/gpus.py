"""GPU discovery on this machine, through NVML (pynvml); degrades to none.

``SUBM_LOCAL_GPUS`` overrides discovery: a count (``2``) or device indices
(``0,3``), e.g. to try a GPU job's plan on a machine without GPUs.
"""
from __future__ import annotations

import os
import warnings
from typing import Dict, List, Optional


def nvml_gpus() -> Optional[List[Dict[str, object]]]:
    """Every GPU NVML sees (index, name, memory, utilization); None when NVML is unavailable."""
    try:
        with warnings.catch_warnings():  # the 'pynvml' wrapper package warns; nvidia-ml-py does not
            warnings.simplefilter("ignore")
            import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError: no driver, no library, no device
        return None
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            try:
                util = pynvml.nvmlDeviceGetUtilizationRates(h).gpu
            except Exception:
                util = None
            out.append({"index": i, "name": name.decode() if isinstance(name, bytes) else name,
                        "memory_mb": int(mem.total) // (1 << 20), "used_mb": int(mem.used) // (1 << 20),
                        "utilization": util})
        return out
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def local_gpu_ids() -> List[str]:
    """Device indices the local backend may hand to tasks."""
    override = os.environ.get("SUBM_LOCAL_GPUS", "").strip()
    if override:
        if override.isdigit():
            return [str(i) for i in range(int(override))]
        return [x.strip() for x in override.split(",") if x.strip()]
    return [str(g["index"]) for g in nvml_gpus() or []]


def describe_local_gpus() -> str:
    if os.environ.get("SUBM_LOCAL_GPUS", "").strip():
        return f"SUBM_LOCAL_GPUS={os.environ['SUBM_LOCAL_GPUS']}"
    gpus = nvml_gpus()
    if gpus is None:
        return "no NVIDIA driver found (NVML unavailable)"
    return f"{len(gpus)} GPU(s) found by NVML" + (f": {', '.join(str(g['name']) for g in gpus)}" if gpus else "")
