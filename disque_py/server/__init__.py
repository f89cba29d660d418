"""The server layer: where the layers below meet the event loop (asyncio on
uvloop), sockets and files. runtime.py is the composition root: it makes
every part of a running node and says where each lives.
"""
