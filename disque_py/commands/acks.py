"""Acknowledgement commands: ACKJOB and FASTACK."""

from __future__ import annotations

from disque_py.commands.args import check_job_ids


def ackjob(server, session, argv):
    """ACKJOB job-id ... job-id"""
    node = server.node
    ids = argv[1:]
    check_job_ids(ids, node.lookup)
    return node.ack_jobs(ids)


def fastack(server, session, argv):
    """FASTACK job-id ... job-id"""
    node = server.node
    ids = argv[1:]
    check_job_ids(ids, node.lookup)
    return node.fast_ack(ids)
