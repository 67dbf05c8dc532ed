"""Horovod: one worker task is one host of ``horovodrun -H task0:P,task1:P,...`` (P processes
per task), so each process gets the rank, local rank and cross rank that horovodrun's host
assignment gives the same slot.

Horovod cannot be installed here; ``horovodrun_assignment`` states horovodrun's rule as read
in its source (``horovod/runner/common/util/hosts.py``, ``get_host_assignments``; the
variables in ``horovod/runner/gloo_run.py``): hosts in order, each host's slots take the next
ranks; a slot's cross rank is its host's place among the hosts that have that local rank.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import pytest

from submarine_py.jobfile import spec_from_dict
from submarine_py.plan import make_plan

pytestmark = pytest.mark.unit

SHAPES = [(1, 1), (2, 1), (2, 2), (3, 2), (4, 8)]


def horovodrun_assignment(hosts: List[Tuple[str, int]]) -> List[Dict[str, str]]:
    """The HOROVOD_* variables horovodrun gives each slot of ``hosts`` ((name, slots) in
    order), in rank order."""
    size = sum(slots for _, slots in hosts)
    slots_out = []
    rank = 0
    for h, (name, slots) in enumerate(hosts):
        for local_rank in range(slots):
            peers = [other for other, (_, n) in enumerate(hosts) if n > local_rank]  # hosts with this local rank
            slots_out.append({
                "HOROVOD_HOSTNAME": name, "HOROVOD_RANK": str(rank), "HOROVOD_SIZE": str(size),
                "HOROVOD_LOCAL_RANK": str(local_rank), "HOROVOD_LOCAL_SIZE": str(slots),
                "HOROVOD_CROSS_RANK": str(peers.index(h)), "HOROVOD_CROSS_SIZE": str(len(peers)),
            })
            rank += 1
    return slots_out


def our_envs(tasks: int, processes: int, same_machine: bool = True) -> List[Dict[str, str]]:
    """Every process's environment, tasks in index order then local ranks."""
    plan = make_plan(spec_from_dict({"name": "h", "framework": "horovod", "roles": {
        "worker": {"instances": tasks, "processes": processes, "command": "python train.py"}}}))
    cluster = plan.cluster_spec({(t.role, t.index): f"{'m' if same_machine else f'm{t.index}'}:{100 + t.index}"
                                 for t in plan.tasks})
    return [env for t in plan.tasks for env in plan.process_envs(t, cluster, "job_1", 0)]


@pytest.mark.parametrize("tasks, processes", SHAPES, ids=[f"{n}x{p}" for n, p in SHAPES])
def test_each_process_gets_horovodruns_ranks_for_the_same_slot(tasks, processes):
    ours = our_envs(tasks, processes)
    theirs = horovodrun_assignment([(f"task{t}", processes) for t in range(tasks)])
    assert len(ours) == len(theirs) == tasks * processes
    names: Dict[str, set] = {}  # horovodrun's host name -> the names we give its processes
    for mine, slot in zip(ours, theirs):
        for name, value in slot.items():
            if name == "HOROVOD_HOSTNAME":
                names.setdefault(value, set()).add(mine[name])
            else:
                assert mine[name] == value, (name, mine, slot)
        assert mine["HOROVOD_LOCAL_RANK"] == mine["SUBM_LOCAL_RANK"]
    # One name per horovodrun host, and hosts never share one: Gloo meets a host's local ranks
    # under its name, so two tasks on the same machine ("m" here) must not look like one host.
    assert all(len(given) == 1 for given in names.values())
    assert len({n for given in names.values() for n in given}) == tasks


def test_the_hostname_is_the_tasks_wherever_the_tasks_run():
    apart = our_envs(2, 2, same_machine=False)
    assert [e["HOROVOD_HOSTNAME"] for e in apart] == ["m0-worker-0", "m0-worker-0", "m1-worker-1", "m1-worker-1"]
    together = our_envs(2, 2, same_machine=True)
    assert [e["HOROVOD_HOSTNAME"] for e in together] == ["m-worker-0", "m-worker-0", "m-worker-1", "m-worker-1"]
    assert [e["HOROVOD_RANK"] for e in together] == ["0", "1", "2", "3"]


def test_the_rendezvous_is_worker_0s_address_for_every_process():
    envs = our_envs(3, 2, same_machine=False)
    assert {(e["HOROVOD_GLOO_RENDEZVOUS_ADDR"], e["HOROVOD_GLOO_RENDEZVOUS_PORT"]) for e in envs} == {("m0", "100")}
