"""pydisque, the Disque client from PyPI, driven unchanged against our server.

pydisque builds plain redis.Redis connections. On redis-py 8 every new
connection first sends `HELLO 3` (redis-py's RESP3 handshake) before
pydisque's own bare `HELLO`. The original Disque 1.0-rc1 answers that
handshake with "-ERR wrong number of arguments for 'hello' command", so
pydisque on current redis-py cannot connect to Disque itself at all;
disque-py answers the handshake (see commands/admin.py), which is the one
place these tests rely on behaviour beyond Disque's.

redis-py keeps an error's prefix in the message unless it is ERR, so the
tests expect "NOREPL Not enough ..." but "TTL must be a number > 0".

pydisque's get_job() documents its tuples as (job_id, queue_name, body, ...)
but unpacks GETJOB's [queue, id, body, ...] positionally, so the first
element is really the queue name. The tests check the positions.
"""

from __future__ import annotations

import time

import pytest
import redis
from pydisque.client import Client

pytestmark = pytest.mark.timeout(60)

SHOW_FIELDS = [b"id", b"queue", b"state", b"repl", b"ttl", b"ctime", b"delay", b"retry",
               b"nacks", b"additional-deliveries", b"nodes-delivered", b"nodes-confirmed",
               b"next-requeue-within", b"next-awake-within", b"body"]
QSTAT_FIELDS = [b"name", b"len", b"age", b"idle", b"blocked", b"import-from", b"import-rate",
                b"jobs-in", b"jobs-out", b"pause"]


@pytest.fixture
def disque(server):
    client = Client([f"127.0.0.1:{server.port}"])
    client.connect()
    yield client
    client.get_connection().close()


def node_id(server) -> bytes:
    hello = server.client(protocol=2).execute_command("HELLO")
    return hello[1]


def test_connect_sends_hello_and_records_the_node(server, disque):
    node = disque.connected_node
    assert node.node_id == node_id(server)
    assert (node.host, node.port) == ("127.0.0.1", server.port)
    hello = disque.hello()
    assert hello[0] == 1
    assert hello[1] == node.node_id
    me = hello[2]
    assert me[0] == node.node_id
    assert me[2] == str(server.port).encode()


def test_add_job_returns_the_job_id(server, disque):
    job_id = disque.add_job("q", "body")
    assert isinstance(job_id, bytes) and len(job_id) == 40
    assert job_id.startswith(b"D-" + node_id(server)[:8] + b"-")
    assert job_id.endswith(b"-05a1")


def test_add_job_with_options(disque):
    job_id = disque.add_job("q", "body", timeout=100, replicate=1, delay=1, retry=5, ttl=100,
                            maxlen=10, asynchronous=True)
    info = disque.show(job_id, return_dict=True)
    assert (info[b"repl"], info[b"delay"], info[b"retry"]) == (1, 1, 5)
    assert 98 <= info[b"ttl"] <= 100
    assert info[b"state"] == b"active"          # delayed, not queued yet
    assert job_id.endswith(b"-0001")


def test_add_job_retry_0_gives_an_at_most_once_id(disque):
    job_id = disque.add_job("q", "body", retry=0)
    assert job_id.endswith(b"-05a0")
    assert disque.show(job_id, return_dict=True)[b"retry"] == 0


def test_add_job_errors_reach_the_caller(disque):
    with pytest.raises(redis.ResponseError,
                       match="^NOREPL Not enough reachable nodes for the requested replication level$"):
        disque.add_job("q", "body", replicate=2)
    with pytest.raises(redis.ResponseError, match="^TTL must be a number > 0$"):
        disque.add_job("q", "body", ttl=-1)
    assert disque.qlen("q") == 0


def test_get_job_and_its_tuple_positions(disque):
    job_id = disque.add_job("q", b"payload\x00\r\n")
    jobs = disque.get_job(["q"])
    assert jobs == [(b"q", job_id, b"payload\x00\r\n")]


def test_get_job_with_counters(disque):
    job_id = disque.add_job("q", "body")
    assert disque.get_job(["q"], withcounters=True) == [(b"q", job_id, b"body", 0, 0)]
    disque.nack_job(job_id)
    assert disque.get_job(["q"], withcounters=True) == [(b"q", job_id, b"body", 1, 0)]
    disque.enqueue(job_id)
    assert disque.get_job(["q"], withcounters=True, count=3) == [(b"q", job_id, b"body", 1, 1)]


def test_get_job_count_over_several_queues(disque):
    a = disque.add_job("a", "a1")
    b = disque.add_job("b", "b1")
    a2 = disque.add_job("a", "a2")
    assert disque.get_job(["a", "b"], count=5) == [(b"a", a, b"a1"), (b"b", b, b"b1"),
                                                  (b"a", a2, b"a2")]


def test_get_job_nohang_on_an_empty_queue_is_an_empty_list(disque):
    assert disque.get_job(["q"], nohang=True) == []


def test_get_job_timeout_is_an_empty_list(disque):
    start = time.monotonic()
    assert disque.get_job(["q"], timeout=200) == []
    assert time.monotonic() - start >= 0.18


def test_working_returns_the_retry_time(disque):
    job_id = disque.add_job("q", "body", retry=7)
    disque.get_job(["q"])
    assert disque.working(job_id) == 7


def test_working_on_an_unknown_job_raises(disque):
    job_id = disque.add_job("q", "body")
    disque.del_job(job_id)
    with pytest.raises(redis.ResponseError,
                       match=r"^NOJOB Job not known in the context of this node\.$"):
        disque.working(job_id)


def test_nack_job_requeues_and_counts(disque):
    job_id = disque.add_job("q", "body")
    disque.get_job(["q"])
    assert disque.nack_job(job_id) is None          # pydisque drops the count
    assert disque.qlen("q") == 1
    assert disque.show(job_id, return_dict=True)[b"nacks"] == 1


def test_ack_job_forgets_the_job_on_a_lone_node(disque):
    job_id = disque.add_job("q", "body")
    disque.get_job(["q"])
    assert disque.ack_job(job_id) is None           # pydisque drops the count
    assert disque.show(job_id) is None


def test_fast_ack_deletes_the_job(disque):
    job_id = disque.add_job("q", "body")
    assert disque.fast_ack(job_id) is None          # pydisque drops the count
    assert disque.show(job_id) is None
    assert disque.qlen("q") == 0


def test_del_job_returns_the_count(disque):
    a = disque.add_job("q", "a")
    b = disque.add_job("q", "b")
    assert disque.del_job(a, b) == 2
    assert disque.del_job(a) == 0


def test_enqueue_and_dequeue_return_counts(disque):
    job_id = disque.add_job("q", "body")
    assert disque.dequeue(job_id) == 1
    assert disque.qlen("q") == 0
    assert disque.dequeue(job_id) == 0
    assert disque.enqueue(job_id) == 1
    assert disque.qlen("q") == 1
    assert disque.enqueue(job_id) == 0


def test_qlen(disque):
    assert disque.qlen("q") == 0
    disque.add_job("q", "a")
    disque.add_job("q", "b")
    assert disque.qlen("q") == 2


def test_qstat(disque):
    disque.add_job("q", "a")
    disque.add_job("q", "b")
    disque.get_job(["q"])
    flat = disque.qstat("q")
    assert flat[::2] == QSTAT_FIELDS
    stat = disque.qstat("q", return_dict=True)
    assert stat[b"name"] == b"q"
    assert (stat[b"len"], stat[b"blocked"], stat[b"jobs-in"], stat[b"jobs-out"]) == (1, 0, 2, 1)
    assert stat[b"import-from"] == [] and stat[b"import-rate"] == 0
    assert stat[b"pause"] == b"none"
    assert isinstance(stat[b"age"], int) and isinstance(stat[b"idle"], int)


def test_qstat_of_a_missing_queue_is_none(disque):
    assert disque.qstat("nosuch") is None


def test_qpeek(disque):
    a = disque.add_job("q", "a")
    b = disque.add_job("q", "b")
    assert disque.qpeek("q", 10) == [[b"q", a, b"a"], [b"q", b, b"b"]]
    assert disque.qpeek("q", -1) == [[b"q", b, b"b"]]
    assert disque.qpeek("nosuch", 1) == []
    assert disque.qlen("q") == 2


def test_show(server, disque):
    job_id = disque.add_job("q", b"bin\x00\xff", retry=10, ttl=100)
    flat = disque.show(job_id)
    assert flat[::2] == SHOW_FIELDS
    info = disque.show(job_id, return_dict=True)
    me = node_id(server)
    assert info[b"id"] == job_id and info[b"queue"] == b"q" and info[b"state"] == b"queued"
    assert (info[b"repl"], info[b"delay"], info[b"retry"]) == (1, 0, 10)
    assert (info[b"nacks"], info[b"additional-deliveries"]) == (0, 0)
    assert info[b"nodes-delivered"] == [me] and info[b"nodes-confirmed"] == []
    assert isinstance(info[b"ctime"], int) and isinstance(info[b"next-awake-within"], int)
    assert 8000 <= info[b"next-requeue-within"] <= 10300
    assert info[b"body"] == b"bin\x00\xff"


def test_show_of_an_unknown_job_is_none_and_a_bad_id_raises(disque):
    job_id = disque.add_job("q", "body")
    disque.del_job(job_id)
    assert disque.show(job_id) is None
    with pytest.raises(redis.ResponseError, match=r"^BADID Invalid Job ID format\.$"):
        disque.show("nonsense")


def test_pause(disque):
    assert disque.pause("q", kw_in=True) == b"in"
    assert disque.pause("q", kw_state=True) == b"in"
    with pytest.raises(redis.ResponseError, match="^PAUSED Queue paused in input, try later$"):
        disque.add_job("q", "body")
    assert disque.pause("q", kw_in=True, kw_out=True) == b"all"
    assert disque.pause("q", kw_out=True, kw_bcast=True) == b"out"
    assert disque.pause("q", kw_none=True) == b"none"
    disque.add_job("q", "body")
    assert disque.qlen("q") == 1


def test_qscan(disque):
    for name in ("q1", "q2", "q3"):
        disque.add_job(name, "x")
    disque.add_job("q3", "y")
    cursor, names = disque.qscan(busyloop=True)
    assert cursor == b"0"
    assert sorted(names) == [b"q1", b"q2", b"q3"]
    cursor, names = disque.qscan(busyloop=True, minlen=2)
    assert (cursor, names) == (b"0", [b"q3"])
    cursor, names = disque.qscan(busyloop=True, maxlen=1, count=5)
    assert sorted(names) == [b"q1", b"q2"]


def test_qscan_full_iteration(disque):
    wanted = {b"queue-%d" % i for i in range(300)}
    for name in wanted:
        disque.add_job(name, "x")
    seen, cursor = set(), 0
    for _ in range(10000):
        cursor, names = disque.qscan(cursor=cursor, count=10)
        seen.update(names)
        if cursor == b"0":
            break
    assert cursor == b"0" and seen == wanted


def test_jscan(disque):
    a = disque.add_job("q1", "a")
    b = disque.add_job("q2", "b")
    disque.get_job(["q2"])
    cursor, ids = disque.jscan(busyloop=True)
    assert cursor == b"0" and sorted(ids) == sorted([a, b])
    assert disque.jscan(busyloop=True, state=["queued"]) == [b"0", [a]]
    assert disque.jscan(busyloop=True, state=["queued", "active"], queue="q2") == [b"0", [b]]
    assert disque.jscan(busyloop=True, queue="q1", reply="id") == [b"0", [a]]
    cursor, jobs = disque.jscan(busyloop=True, queue="q1", reply="all")
    assert cursor == b"0" and len(jobs) == 1
    assert jobs[0][::2] == SHOW_FIELDS
    assert dict(zip(jobs[0][::2], jobs[0][1::2]))[b"id"] == a


def test_jscan_full_iteration(disque):
    wanted = {disque.add_job(b"q%d" % (i % 5), "x") for i in range(500)}
    seen, cursor = set(), 0
    for _ in range(10000):
        cursor, ids = disque.jscan(cursor=cursor, count=20)
        seen.update(ids)
        if cursor == b"0":
            break
    assert cursor == b"0" and seen == wanted
