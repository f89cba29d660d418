"""Acknowledgement commands: ACKJOB and FASTACK."""

from __future__ import annotations

from disque_py.commands.args import job_ids


def ackjob(server, session, argv):
    """ACKJOB job-id ... job-id"""
    return server.node.ack_jobs(job_ids(server, argv))


def fastack(server, session, argv):
    """FASTACK job-id ... job-id"""
    return server.node.fast_ack(job_ids(server, argv))
