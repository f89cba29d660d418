"""The formats layer: bytes on the wire, and nothing about what they mean.

    resp.py   RESP2 and RESP3 reply encoding (requests are parsed by the
              engine's RequestParser, or by hiredis in clients)
    bus.py    the cluster bus's frames: header, message types and flags,
              bodies (the engine's data plane names them too)

A job's own bytes (in REPLJOB and YOURJOBS, and in the AOF) are the
engine's (engine/model/wire.pxi): one packer and one parser, in C. The
AOF's record format needs them, so it lives above the engine, in
persistence/.
"""
