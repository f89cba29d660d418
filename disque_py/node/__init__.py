"""The node layer: one Disque node, the compiled engine's NodeCore plus the
components that react to other nodes and to parked clients.

node.py builds a Node and says what each component owns; the engine calls
the components only through the NodeHooks node.py wires
(engine/node/hooks.pxi). Pure: no asyncio, sockets or files; effects go to
node.effects for the server layer.
"""
