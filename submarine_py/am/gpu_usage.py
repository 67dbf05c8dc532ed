"""A task's GPU use, from the samples its executor sends (``POST /v1/gpu``).

Each sample holds, for every GPU the task sees, its utilization (%) and memory
used at one moment. The AM keeps running figures per task, not the samples:
mean and peak utilization, peak memory (the task's GPUs together), and the
longest stretch during which every one of its GPUs sat at 0 %. A task whose
GPUs stayed idle for ``idle_after`` seconds or more is flagged ``idle``: it
holds GPUs that others could use. The default, 300 s, is set for the AM by
``SUBM_GPU_IDLE_SECONDS``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional, Sequence

from ..report import GpuSummary

DEFAULT_IDLE_SECONDS = 300.0
DEFAULT_SAMPLE_SECONDS = 5.0


def idle_seconds_setting(env: Mapping[str, str] = os.environ) -> float:
    try:
        return max(1.0, float(env.get("SUBM_GPU_IDLE_SECONDS") or DEFAULT_IDLE_SECONDS))
    except ValueError:
        return DEFAULT_IDLE_SECONDS


def sample_seconds_setting(env: Mapping[str, str] = os.environ) -> float:
    try:
        return max(0.5, float(env.get("SUBM_GPU_SAMPLE_SECONDS") or DEFAULT_SAMPLE_SECONDS))
    except ValueError:
        return DEFAULT_SAMPLE_SECONDS


@dataclass
class GpuUsage:
    """Running figures of one task's GPU samples (mutable; the AM holds its lock)."""

    devices: List[str] = field(default_factory=list)
    samples: int = 0
    utilization_sum: float = 0.0
    peak_utilization: int = 0
    peak_memory_mb: int = 0
    memory_total_mb: int = 0
    #: Time of the first sample of the current all-idle stretch (None while busy).
    idle_since: Optional[float] = None
    idle_now_seconds: float = 0.0
    longest_idle_seconds: float = 0.0
    last_time: Optional[float] = None

    def add(self, time: float, devices: Sequence[Mapping[str, Any]]) -> None:
        """One sample; samples out of order (older than the last) are ignored."""
        if not devices or (self.last_time is not None and time < self.last_time):
            return
        utils = [max(0, min(100, int(d.get("utilization") or 0))) for d in devices]
        for d in devices:
            if str(d.get("id")) not in self.devices:
                self.devices.append(str(d.get("id")))
        self.samples += 1
        self.utilization_sum += sum(utils) / len(utils)
        self.peak_utilization = max(self.peak_utilization, max(utils))
        self.peak_memory_mb = max(self.peak_memory_mb, sum(int(d.get("memory_used_mb") or 0) for d in devices))
        self.memory_total_mb = max(self.memory_total_mb,
                                   sum(int(d.get("memory_total_mb") or 0) for d in devices))
        if max(utils) == 0:
            if self.idle_since is None:
                self.idle_since = time
            self.idle_now_seconds = time - self.idle_since
            self.longest_idle_seconds = max(self.longest_idle_seconds, self.idle_now_seconds)
        else:
            self.idle_since, self.idle_now_seconds = None, 0.0
        self.last_time = time

    def summary(self, idle_after: float = DEFAULT_IDLE_SECONDS) -> Optional[GpuSummary]:
        """The report's ``gpu`` of a task; None before the first sample."""
        if not self.samples:
            return None
        return GpuSummary(
            devices=tuple(self.devices), samples=self.samples,
            mean_utilization=round(self.utilization_sum / self.samples, 1),
            peak_utilization=self.peak_utilization, peak_memory_mb=self.peak_memory_mb,
            memory_total_mb=self.memory_total_mb, idle_seconds=round(self.longest_idle_seconds, 1),
            idle_now_seconds=round(self.idle_now_seconds, 1), idle=self.longest_idle_seconds >= idle_after)


def add_samples(usage: GpuUsage, samples: Any) -> int:
    """Add an executor's batch (``[{"time", "devices": [...]}]``); returns how many were taken.
    Raises ``ValueError`` on a malformed batch (the AM answers 400)."""
    if not isinstance(samples, list):
        raise ValueError("samples must be a list")
    taken = 0
    for s in samples:
        if not isinstance(s, dict) or not isinstance(s.get("devices"), list):
            raise ValueError("each sample needs a list of devices")
        if not all(isinstance(d, dict) for d in s["devices"]):
            raise ValueError("each device must be an object")
        usage.add(float(s.get("time") or 0), s["devices"])
        taken += 1
    return taken
