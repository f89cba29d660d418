"""What the server measures about itself: the slow log and the latency
monitor, and the reports built from them.

Plain data structures with injectable clocks, no I/O: the connection, the
runtime and the AOF writer measure and feed them; SLOWLOG and LATENCY
(commands/diagnostics.py) read them. They sit below every layer that uses
them, so the persistence and command layers can import them freely.
"""
