"""Acknowledgement commands: ACKJOB and FASTACK, compiled (engine/net/hot.pxi
parses, runs and answers them; the collection of acks is node/acks.py)."""

from __future__ import annotations

from disque_py.commands.context import compiled

# ACKJOB job-id ... job-id
ackjob = compiled("ackjob")
# FASTACK job-id ... job-id
fastack = compiled("fastack")
