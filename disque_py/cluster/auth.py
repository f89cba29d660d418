"""Authenticating a cluster bus link with a shared secret, sans I/O.

With `cluster-secret` set, every link starts with a three-step handshake
before any bus message, a challenge-response in both directions over fresh
nonces, so the secret never crosses the wire and a recorded handshake
cannot be replayed:

    connector -> acceptor   HELLO      nonce_c (32 random bytes), connector's node ID
    acceptor  -> connector  CHALLENGE  nonce_s, MAC("acceptor", nonce_c, nonce_s, ID)
    connector -> acceptor   PROOF      MAC("connector", nonce_c, nonce_s, ID)

MAC is HMAC-SHA256 keyed with the secret. The acceptor proves it holds the
secret before the connector says anything more, and the connector proves
it before the acceptor acts on any frame; the link is then bound to the
connector's node ID (bus.py drops frames claiming another sender). An
acceptor without a secret answers a CHALLENGE with no MAC: a connector
that requires authentication closes the link, one in `accept` mode (the
window of a rolling upgrade) goes on unauthenticated.

Handshake frames share the bus framing (a 4-byte length, then the
payload) and are told apart by their signature, b"DqA1" (bus messages
start with b"DqP1"). This module only builds and checks them.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct

from disque_py.formats import bus as msg

SIGNATURE = b"DqA1"
HELLO, CHALLENGE, PROOF = 1, 2, 3
NONCE_LEN = 32
MAC_LEN = 32
MAX_FRAME = 256                # an unauthenticated link may send no more per frame
MIN_FRAME = 5                  # the shortest payload: signature and step
MODE_REQUIRE = "require"
MODE_ACCEPT = "accept"
_STEP = struct.Struct(">4sB")
_ACCEPTOR_CONTEXT = b"disque-py bus acceptor"
_CONNECTOR_CONTEXT = b"disque-py bus connector"


class AuthFailed(ValueError):
    """The peer did not prove it holds the secret, or broke the protocol."""


def is_handshake(payload) -> bool:
    return bytes(payload[:4]) == SIGNATURE


def _frame(step: int, body: bytes) -> bytes:
    payload = _STEP.pack(SIGNATURE, step) + body
    return msg.LENGTH.pack(len(payload)) + payload


def _parse(payload, step: int, size: int) -> bytes:
    if len(payload) != _STEP.size + size or _STEP.unpack_from(payload, 0) != (SIGNATURE, step):
        raise AuthFailed("unexpected handshake frame")
    return bytes(payload[_STEP.size:])


def _mac(secret: bytes, context: bytes, nonce_c: bytes, nonce_s: bytes, node_id: bytes) -> bytes:
    return hmac.new(secret, context + nonce_c + nonce_s + node_id, hashlib.sha256).digest()


class Connector:
    """Our side of a link we opened."""

    def __init__(self, secret: bytes, my_id: bytes, mode: str) -> None:
        self.secret = secret
        self.my_id = my_id
        self.mode = mode
        self.nonce = os.urandom(NONCE_LEN)

    def hello(self) -> bytes:
        return _frame(HELLO, self.nonce + self.my_id)

    def on_challenge(self, payload) -> tuple[bytes | None, bool]:
        """(the PROOF frame to send or None, authenticated). Raises
        AuthFailed when the acceptor cannot prove the secret and this node
        requires it."""
        body = bytes(payload[_STEP.size:])
        if not is_handshake(payload) or len(body) not in (NONCE_LEN, NONCE_LEN + MAC_LEN) \
                or payload[4] != CHALLENGE:
            raise AuthFailed("unexpected handshake frame")
        nonce_s, mac = body[:NONCE_LEN], body[NONCE_LEN:]
        if not mac:
            if self.mode == MODE_REQUIRE:
                raise AuthFailed("the peer has no cluster secret")
            return None, False
        expected = _mac(self.secret, _ACCEPTOR_CONTEXT, self.nonce, nonce_s, self.my_id)
        if not hmac.compare_digest(mac, expected):
            raise AuthFailed("the peer does not hold this cluster's secret")
        proof = _mac(self.secret, _CONNECTOR_CONTEXT, self.nonce, nonce_s, self.my_id)
        return _frame(PROOF, proof), True


class Acceptor:
    """Our side of a link a peer opened."""

    def __init__(self, secret: bytes | None) -> None:
        self.secret = secret
        self.nonce = os.urandom(NONCE_LEN)
        self.nonce_c = b""
        self.peer_id = b""

    def on_hello(self, payload) -> bytes:
        """The CHALLENGE frame answering a HELLO (without a MAC when this
        node has no secret)."""
        body = _parse(payload, HELLO, NONCE_LEN + msg.NODE_ID_LEN)
        self.nonce_c, self.peer_id = body[:NONCE_LEN], body[NONCE_LEN:]
        if not msg.is_node_id(self.peer_id):
            raise AuthFailed("bad node ID in the handshake")
        if self.secret is None:
            return _frame(CHALLENGE, self.nonce)
        mac = _mac(self.secret, _ACCEPTOR_CONTEXT, self.nonce_c, self.nonce, self.peer_id)
        return _frame(CHALLENGE, self.nonce + mac)

    def on_proof(self, payload) -> bytes:
        """The connector's node ID, once its PROOF checks out."""
        proof = _parse(payload, PROOF, MAC_LEN)
        expected = _mac(self.secret, _CONNECTOR_CONTEXT, self.nonce_c, self.nonce, self.peer_id)
        if not hmac.compare_digest(proof, expected):
            raise AuthFailed("the peer does not hold this cluster's secret")
        return self.peer_id
