"""A bus link for tests: LinkBase (engine/net/link.pxi) with hooks that
record what the link hands them, and nothing else (no socket, no
cluster layer)."""

from __future__ import annotations

from disque_py.engine import LinkBase
from disque_py.formats import bus as msg


class RecordingLink(LinkBase):
    """on_frame's payloads, refuse_length's lengths and fast_frames_done's
    (sender, frames, bytes), in order. `core` and `fast` open the fast path
    (a NodeCore's); `close_after`: the link closes itself in on_frame after
    that many frames (as BusLink does on a bad frame)."""

    def __init__(self, frame_limit: int = msg.MAX_FRAME, core=None, fast: bool = False,
                 peer_id: bytes | None = None, close_after: int | None = None) -> None:
        self.frame_limit = frame_limit
        self.core = core
        self.fast = fast
        self.peer_id = peer_id
        self.close_after = close_after
        self.frames: list[bytes] = []
        self.refused: list[int] = []
        self.fast_reads: list[tuple[bytes, int, int]] = []

    def on_frame(self, payload: bytes) -> None:
        self.frames.append(payload)
        if self.close_after is not None and len(self.frames) >= self.close_after:
            self.closed = True

    def refuse_length(self, length: int) -> None:
        self.refused.append(length)

    def fast_frames_done(self, sender: bytes, frames: int, size: int) -> None:
        self.fast_reads.append((sender, frames, size))
