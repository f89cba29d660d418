"""What a failed call does next (client/failover.py), on a fake clock:
the next node after an unreachable one or a refusal by the node, the
caller's error otherwise, a lost call resent only when safe, and
NoNodeError once every node was tried."""

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from disque_py.client.errors import CommandError, LeavingError, PausedError
from disque_py.client.failover import Failover
from disque_py.client.routing import NoNodeError, Routes

NODES = [("a", 1), ("b", 2), ("c", 3)]
LOST = RedisConnectionError("gone")


def failover(retry_safe: bool = True) -> Failover:
    return Failover(Routes(NODES, clock=lambda: 0.0), retry_safe)


def test_an_unreachable_node_sends_the_call_to_the_next_until_every_node_was_tried():
    attempt = failover(retry_safe=False)             # nothing was sent: safe anyway
    assert attempt.unreachable(LOST) is None and attempt.unreachable(LOST) is None
    assert isinstance(attempt.unreachable(LOST), NoNodeError)


def test_a_node_that_refuses_for_itself_sends_the_call_on():
    attempt = failover()
    assert attempt.refused(ResponseError("LEAVING This node is leaving the cluster")) is None
    assert attempt.refused(ResponseError("LEAVING This node is leaving the cluster")) is None
    last = attempt.refused(ResponseError("LEAVING This node is leaving the cluster"))
    assert isinstance(last, LeavingError)            # every node tried: the caller's


def test_any_other_refusal_is_the_callers_in_its_disque_class():
    attempt = failover()
    assert isinstance(attempt.refused(ResponseError("PAUSED Queue paused")), PausedError)
    assert isinstance(attempt.refused(ResponseError("syntax error", status_code="ERR")),
                      CommandError)


def test_a_lost_call_is_resent_only_when_safe():
    assert failover(retry_safe=False).lost(LOST) is LOST
    attempt = failover(retry_safe=True)
    assert attempt.lost(LOST) is None and attempt.lost(LOST) is None
    assert isinstance(attempt.lost(LOST), NoNodeError)
