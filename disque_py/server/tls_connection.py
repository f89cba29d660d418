"""A client connection on the TLS port: an unchanged ClientConnection, fed
its plaintext through a buffer we own.

uvloop's SSL transport gives a plain asyncio.Protocol its plaintext by
calling SSLObject.read(256 KiB) for every chunk: a fresh 256 KiB bytes
object each time, shrunk to what was read. Whether glibc serves that from
the heap or with an mmap and munmap per read depends on what the process
freed before (its dynamic mmap threshold); in the second case a node
answered ADDJOB over TLS 4 times slower (benchmarks/README.md). A
BufferedProtocol is given the plaintext in a buffer it provides instead:
TlsClientProtocol provides one buffer shared by every TLS connection
(uvloop fills it and calls buffer_updated at once; the bytes are copied
out before any command runs) and hands the bytes to the ClientConnection,
which works as it does on the plain port. The plain port never sees this.
"""

from __future__ import annotations

import asyncio

READ_BUFFER_SIZE = 256 * 1024       # uvloop's own largest SSL read
_buffer = bytearray(READ_BUFFER_SIZE)
_view = memoryview(_buffer)


class TlsClientProtocol(asyncio.BufferedProtocol):
    __slots__ = ("conn",)

    def __init__(self, conn) -> None:
        self.conn = conn

    def connection_made(self, transport) -> None:
        self.conn.connection_made(transport)

    def get_buffer(self, sizehint: int) -> bytearray:
        return _buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.conn.data_received(_view[:nbytes].tobytes())

    def eof_received(self):
        return self.conn.eof_received()

    def connection_lost(self, exc) -> None:
        self.conn.connection_lost(exc)

    def pause_writing(self) -> None:
        self.conn.pause_writing()

    def resume_writing(self) -> None:
        self.conn.resume_writing()
