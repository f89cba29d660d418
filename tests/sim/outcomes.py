"""What the checker knows of an ADDJOB's fate, and the protocol constants
its checks compare answers with (the engine's own, restated: a check
must not read the rule it checks from the code under test)."""

WAITING, OK, REFUSED, UNKNOWN = "waiting", "ok", "refused", "unknown"
MAX_DEFAULT_REPLICATION = 3       # REPLICATE's default: the cluster's size, at most this
NOT_ENOUGH_NODES = "Not enough reachable nodes"
