"""The task's GPUs, sampled through NVML (NVIDIA's driver library) with ``ctypes``.

Standard library only, shipped beside the executor (``subm_nvml.py``, see ``executor.py``);
the AM keeps the figures (``gpu_usage.py``).
"""


#: Where NVML is: the linker's search (the host, images with the NVIDIA Container Toolkit's
#: runtime, which mounts the library into the image's own lib folder: Hadoop 3.1.2+'s
#: nvidia-docker-v2), then the driver volume nvidia-docker 1.0 mounts at /usr/local/nvidia
#: (Hadoop 3.1's nvidia-docker-v1), which images without CUDA's LD_LIBRARY_PATH do not search.
LIBRARIES = ("libnvidia-ml.so.1", "/usr/local/nvidia/lib64/libnvidia-ml.so.1",
             "/usr/local/nvidia/lib/libnvidia-ml.so.1")


def load_library(ctypes, names=LIBRARIES):
    """The first of ``names`` that loads; OSError when none does."""
    error = None
    for name in ((names,) if isinstance(names, str) else names):
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            error = exc
    raise error or OSError("no NVML library named")


def visible_gpu_ids(env, count):
    """The NVML devices a task sees: CUDA_VISIBLE_DEVICES's entries (indices or UUIDs) in
    order, or every device where it is unset. Entries that are neither are left out."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return [str(i) for i in range(count)]
    out = []
    for item in value.split(","):
        item = item.strip()
        if item.isdigit() and int(item) < count:
            out.append(item)
        elif item.startswith(("GPU-", "MIG-")):
            out.append(item)
        elif item:  # CUDA ignores the rest of the list after an invalid entry
            break
    return out


def task_env(envs):
    """The environment that names a task's GPUs, from its processes' environments: their
    ``CUDA_VISIBLE_DEVICES`` (every process sees the task's GPUs, as under torchrun), each GPU
    once should they differ; the first environment's where one leaves it unset (all GPUs)."""
    seen = []
    for env in envs:
        if "CUDA_VISIBLE_DEVICES" not in env:
            return envs[0]
        for item in env["CUDA_VISIBLE_DEVICES"].split(","):
            if item.strip() and item.strip() not in seen:
                seen.append(item.strip())
    return dict(envs[0], CUDA_VISIBLE_DEVICES=",".join(seen))


class GpuSampler:
    """Utilization and memory of the task's GPUs through NVML, loaded with ctypes.

    NVML is NVIDIA's driver library (libnvidia-ml.so.1), present wherever a GPU
    is usable; user images need no pynvml. Anything missing (no library, no
    device, a call failing) turns sampling off, silently: it must never disturb
    the task.
    """

    def __init__(self, env, library=LIBRARIES, lib=None):
        """``lib``: an already loaded NVML (tests hand a fake here)."""
        self.handles = []
        self.lib = None
        try:
            import ctypes  # some minimal Pythons lack _ctypes: then no sampling

            class Utilization(ctypes.Structure):  # nvmlUtilization_t
                _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]

            class Memory(ctypes.Structure):  # nvmlMemory_t
                _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                            ("used", ctypes.c_ulonglong)]

            self.ctypes, self.structs = ctypes, (Utilization, Memory)
            lib = lib or load_library(ctypes, library)
            if lib.nvmlInit_v2() != 0:
                return
            self.lib = lib
            count = ctypes.c_uint(0)
            if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
                return self.close()
            for dev in visible_gpu_ids(env, count.value):
                handle = ctypes.c_void_p()
                if dev.isdigit():
                    rc = lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(int(dev)), ctypes.byref(handle))
                else:
                    rc = lib.nvmlDeviceGetHandleByUUID(dev.encode(), ctypes.byref(handle))
                if rc == 0:
                    self.handles.append((dev, handle))
        except (ImportError, OSError, AttributeError):
            self.lib = None
        if not self.handles:
            self.close()

    @property
    def active(self):
        return self.lib is not None and bool(self.handles)

    def sample(self):
        """``[{"id", "utilization" (%), "memory_used_mb", "memory_total_mb"}]``; None when off."""
        if not self.active:
            return None
        out, byref = [], self.ctypes.byref
        for dev, handle in self.handles:
            util, mem = self.structs[0](), self.structs[1]()
            if (self.lib.nvmlDeviceGetUtilizationRates(handle, byref(util)) != 0
                    or self.lib.nvmlDeviceGetMemoryInfo(handle, byref(mem)) != 0):
                continue
            out.append({"id": dev, "utilization": int(util.gpu), "memory_used_mb": int(mem.used) >> 20,
                        "memory_total_mb": int(mem.total) >> 20})
        return out or None

    def close(self):
        if self.lib is not None:
            try:
                self.lib.nvmlShutdown()
            except (OSError, AttributeError):
                pass
        self.lib = None
