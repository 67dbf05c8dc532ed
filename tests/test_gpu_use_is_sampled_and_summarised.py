"""GPU use per task: the executor's NVML sampler (ctypes) and the AM's running figures.

The sampler is exercised with a fake NVML object (pure logic: which devices a task
sees, what a sample holds, how anything missing turns sampling off); the real
library is only present on a GPU machine.
"""
import ctypes

import pytest

from submarine_py.executor.nvml import GpuSampler, visible_gpu_ids
from submarine_py.am.gpu_usage import GpuUsage, add_samples, idle_seconds_setting

pytestmark = pytest.mark.unit


def dev(util, mem=1000, total=16000, id="0"):
    return {"id": id, "utilization": util, "memory_used_mb": mem, "memory_total_mb": total}


# ----------------------------------------------------------------- aggregation
def test_mean_and_peak_utilization_and_peak_memory_of_the_tasks_gpus_together():
    u = GpuUsage()
    u.add(0, [dev(50, 1000, id="0"), dev(30, 2000, id="1")])
    u.add(5, [dev(90, 4000, id="0"), dev(70, 3000, id="1")])
    s = u.summary()
    assert s.devices == ("0", "1")
    assert s.samples == 2
    assert s.mean_utilization == 60.0  # (40 + 80) / 2
    assert s.peak_utilization == 90
    assert s.peak_memory_mb == 7000  # both GPUs at the busiest moment
    assert s.memory_total_mb == 32000
    assert s.idle is False


def test_no_sample_no_summary():
    assert GpuUsage().summary() is None


def test_gpus_at_zero_for_the_threshold_are_flagged_idle_even_after_they_wake_up():
    u = GpuUsage()
    for t in range(0, 301, 10):
        u.add(t, [dev(0)])
    assert u.summary(idle_after=300).idle is True
    assert u.summary(idle_after=300).idle_now_seconds == 300
    u.add(310, [dev(80)])
    s = u.summary(idle_after=300)
    assert s.idle is True and s.idle_seconds == 300 and s.idle_now_seconds == 0


def test_short_idle_stretches_are_not_flagged_and_one_busy_gpu_keeps_the_task_busy():
    u = GpuUsage()
    for t in range(0, 600, 10):
        busy = (t // 100) % 2 == 0  # 90 s idle stretches
        u.add(t, [dev(0, id="0"), dev(50 if busy else 0, id="1")])
    s = u.summary(idle_after=300)
    assert s.idle is False
    assert 0 < s.idle_seconds < 300


def test_samples_out_of_order_are_ignored_and_utilization_is_clamped():
    u = GpuUsage()
    u.add(10, [dev(150)])
    u.add(5, [dev(0)])
    assert u.summary().samples == 1
    assert u.summary().peak_utilization == 100


def test_a_malformed_batch_is_refused():
    u = GpuUsage()
    with pytest.raises(ValueError):
        add_samples(u, {"devices": []})
    with pytest.raises(ValueError):
        add_samples(u, [{"time": 1}])
    with pytest.raises(ValueError):
        add_samples(u, [{"time": 1, "devices": ["x"]}])
    assert add_samples(u, [{"time": 1, "devices": [dev(10)]}, {"time": 2, "devices": [dev(20)]}]) == 2


def test_the_idle_threshold_comes_from_the_environment():
    assert idle_seconds_setting({}) == 300
    assert idle_seconds_setting({"SUBM_GPU_IDLE_SECONDS": "60"}) == 60
    assert idle_seconds_setting({"SUBM_GPU_IDLE_SECONDS": "soon"}) == 300


# -------------------------------------------------------- which devices a task sees
def test_cuda_visible_devices_names_the_tasks_gpus_by_index_or_uuid():
    assert visible_gpu_ids({}, 3) == ["0", "1", "2"]
    assert visible_gpu_ids({"CUDA_VISIBLE_DEVICES": "2,0"}, 4) == ["2", "0"]
    assert visible_gpu_ids({"CUDA_VISIBLE_DEVICES": "GPU-8f3e-aa,1"}, 2) == ["GPU-8f3e-aa", "1"]
    assert visible_gpu_ids({"CUDA_VISIBLE_DEVICES": ""}, 4) == []
    assert visible_gpu_ids({"CUDA_VISIBLE_DEVICES": "-1"}, 4) == []  # CUDA's "no GPU"
    assert visible_gpu_ids({"CUDA_VISIBLE_DEVICES": "0,7,1"}, 2) == ["0"]  # CUDA stops at a bad entry


# ------------------------------------------------------------------ the sampler
class FakeNvml:
    """Answers like libnvidia-ml through ctypes: return codes, results through pointers."""

    def __init__(self, count=2, init_rc=0, uuids=("GPU-aaa", "GPU-bbb")):
        self.count, self.init_rc, self.uuids = count, init_rc, uuids
        self.util = {i: 10 * (i + 1) for i in range(count)}
        self.shutdown = 0

    def nvmlInit_v2(self):
        return self.init_rc

    def nvmlDeviceGetCount_v2(self, out):
        out._obj.value = self.count
        return 0

    def nvmlDeviceGetHandleByIndex_v2(self, index, out):
        if index.value >= self.count:
            return 2
        out._obj.value = 100 + index.value
        return 0

    def nvmlDeviceGetHandleByUUID(self, uuid, out):
        if uuid.decode() not in self.uuids:
            return 13
        out._obj.value = 100 + self.uuids.index(uuid.decode())
        return 0

    def nvmlDeviceGetUtilizationRates(self, handle, out):
        out._obj.gpu = self.util[handle.value - 100]
        return 0

    def nvmlDeviceGetMemoryInfo(self, handle, out):
        out._obj.total, out._obj.used = 16 << 30, (handle.value - 99) << 30
        return 0

    def nvmlShutdown(self):
        self.shutdown += 1
        return 0


def test_the_sampler_reads_only_the_devices_the_task_sees():
    s = GpuSampler({"CUDA_VISIBLE_DEVICES": "1"}, lib=FakeNvml())
    assert s.active
    assert s.sample() == [{"id": "1", "utilization": 20, "memory_used_mb": 2048, "memory_total_mb": 16384}]


def test_the_sampler_resolves_uuids():
    s = GpuSampler({"CUDA_VISIBLE_DEVICES": "GPU-bbb,GPU-zzz"}, lib=FakeNvml())
    assert [d["id"] for d in s.sample()] == ["GPU-bbb"]


def test_no_library_means_no_sampling_silently():
    s = GpuSampler({}, library="libsubm-no-such-nvml.so.1")
    assert not s.active and s.sample() is None


def test_nvml_that_fails_to_start_or_finds_no_device_turns_sampling_off():
    assert not GpuSampler({}, lib=FakeNvml(init_rc=9)).active  # NVML_ERROR_DRIVER_NOT_LOADED
    fake = FakeNvml(count=0)
    assert not GpuSampler({}, lib=fake).active
    assert fake.shutdown == 1
    assert not GpuSampler({"CUDA_VISIBLE_DEVICES": ""}, lib=FakeNvml()).active


def test_a_library_without_the_functions_turns_sampling_off():
    class Old:
        def nvmlInit_v2(self):
            return 0

    assert not GpuSampler({}, lib=Old()).active


def test_the_fake_matches_ctypes_calling_conventions():
    """What the sampler hands NVML are ctypes pointers, as with the real library."""
    seen = []

    class Spy(FakeNvml):
        def nvmlDeviceGetCount_v2(self, out):
            seen.append(type(out).__name__)
            return super().nvmlDeviceGetCount_v2(out)

    GpuSampler({}, lib=Spy())
    assert seen == [type(ctypes.byref(ctypes.c_uint())).__name__]


def test_nvml_is_found_where_gpu_runtimes_put_it_in_an_image():
    """The linker's search first (the host; the NVIDIA runtime of nvidia-docker-v2 mounts the library
    into the image's lib folder), then nvidia-docker 1.0's driver volume at /usr/local/nvidia."""
    from submarine_py.executor.nvml import LIBRARIES, load_library

    tried = []

    class Ctypes:
        @staticmethod
        def CDLL(name):
            tried.append(name)
            if name != "/usr/local/nvidia/lib64/libnvidia-ml.so.1":
                raise OSError(f"{name}: cannot open shared object file")
            return "nvml"

    assert load_library(Ctypes) == "nvml"
    assert tried == ["libnvidia-ml.so.1", "/usr/local/nvidia/lib64/libnvidia-ml.so.1"]
    assert LIBRARIES[0] == "libnvidia-ml.so.1"
    with pytest.raises(OSError):
        load_library(Ctypes, ("libnone.so",))
