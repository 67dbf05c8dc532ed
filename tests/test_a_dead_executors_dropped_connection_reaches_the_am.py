"""An executor whose process dies closes its long poll's connection at once: the AM's HTTP
endpoint tells the AM (``connection_dropped``), which has the containers look at that container
without waiting for the cluster's word (``YarnContainers.suspect``: its NodeManager is asked).
A poll that ends normally, or a connection that stays open, tells nothing."""
from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from submarine_py.am.server import serve
from submarine_py.backends.yarn.am.dropped import Dropped
from submarine_py.executor import protocol

pytestmark = pytest.mark.unit


class WaitingAM:
    """An AM whose long polls wait (until ``release``), recording dropped connections."""

    url, job_id, token = "http://am", "job-1", "secret"

    def __init__(self):
        self.dropped = []
        self.release = threading.Event()
        self.told = threading.Event()

    def heard_from(self, *args, **kw):
        pass

    def next_instructions(self, executor, after, wait):
        self.release.wait(wait)
        return []

    def connection_dropped(self, executor):
        self.dropped.append(executor)
        self.told.set()


def poll(port: int, executor: str, wait: float = 20) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", port))
    conn.sendall((f"GET {protocol.PATH_NEXT}?executor={executor}&after=0&wait={wait} HTTP/1.1\r\n"
                  f"Host: am\r\nAuthorization: Bearer secret\r\n\r\n").encode())
    return conn


@pytest.fixture
def am():
    stub = WaitingAM()
    server, port = serve(stub, host="127.0.0.1")
    stub.port = port
    yield stub
    stub.release.set()
    server.shutdown()
    server.server_close()


def test_a_poll_whose_executor_died_tells_the_am_which_executor_it_was(am):
    conn = poll(am.port, "worker_3")
    time.sleep(0.2)  # the poll waits in the AM
    conn.close()     # what the kernel does for a process killed with -9
    assert am.told.wait(5)
    assert am.dropped == ["worker_3"]


def test_a_kept_connection_closed_between_two_polls_tells_the_am_too(am):
    conn = poll(am.port, "worker_1", wait=0)
    am.release.set()
    assert b"200" in conn.recv(4096).split(b"\r\n", 1)[0]
    conn.close()
    assert am.told.wait(5)
    assert am.dropped == ["worker_1"]


def test_a_connection_reset_between_two_polls_tells_the_am_too(am):
    # A process that dies with bytes of the AM's reply unread resets its connection (RST).
    conn = poll(am.port, "worker_4", wait=0)
    am.release.set()
    time.sleep(0.2)  # the reply is there, unread
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()
    assert am.told.wait(5)
    assert am.dropped == ["worker_4"]


def test_a_poll_that_ends_normally_or_waits_on_tells_nothing(am):
    waiting = poll(am.port, "worker_0")
    answered = poll(am.port, "worker_2", wait=0.1)
    assert answered.recv(4096).startswith(b"HTTP/1.1 200")
    time.sleep(0.5)
    assert am.dropped == []
    waiting.close()
    answered.close()


class Clock:
    now = 100.0

    def __call__(self):
        return self.now


def test_the_nodemanager_is_asked_every_tenth_of_a_second_for_two_seconds_then_left_alone():
    clock, asked = Clock(), []
    dropped = Dropped(lambda ex: (None, None, None), lambda ex: False, clock)
    dropped.ask = lambda ex: (asked.append(clock.now), (False, None))[1]  # its NodeManager: running
    dropped.add("worker_0")
    for _ in range(40):
        assert dropped.ended() == []
        clock.now += 0.06
    assert len(asked) == 17 and asked[0] == 100.0   # 0, 0.12, 0.24, ... within 2 s
    assert dropped.asking == {}


def test_a_nodemanager_that_says_the_container_ended_is_asked_no_more():
    clock, asked = Clock(), []
    dropped = Dropped(lambda ex: (None, None, None), lambda ex: False, clock)
    dropped.ask = lambda ex: (asked.append(ex), (True, None))[1]  # ended with 0: YARN will say
    dropped.add("worker_0")
    dropped.ended()
    clock.now += 0.5
    assert dropped.ended() == [] and asked == ["worker_0"]


def test_an_executor_whose_end_is_known_otherwise_is_no_longer_asked_after():
    clock, asked = Clock(), []
    known = set()
    dropped = Dropped(lambda ex: (None, None, None), lambda ex: ex in known, clock)
    dropped.ask = lambda ex: (asked.append(ex), (False, None))[1]
    dropped.add("worker_0")
    dropped.ended()
    known.add("worker_0")
    clock.now += 1
    dropped.ended()
    assert asked == ["worker_0"] and dropped.asking == {}
