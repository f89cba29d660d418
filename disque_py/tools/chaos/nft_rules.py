"""The nftables rules of the network faults, as text for `nft -f -`.

Every rule set is one table, loaded into one node's network namespace (the
run made the namespace, so nothing else's rules live there) and removed
whole by `nft delete table FAMILY NAME` when its fault heals: one fault, one
table, so faults that overlap never touch each other's rules. A drop in any
table is final, whatever another table accepts. Rules match the addresses of
other nodes only: the checker's clients, in the root namespace behind the
bridge's address, reach every node whatever the faults.

  block_table     a partition: nothing to or from the peers (both ways, any
                  port: bus links and a peer's client port alike)
  loss_table      random loss: P% of the packets sent to the peers are dropped
                  (nftables `numgen random`, one draw per packet)
  reset_table     connection resets: P% of the peers' connection attempts and
                  Q per mille of their TCP packets answered with a TCP reset
  redirect_table  the node's connections to the peers' bus ports go to the
                  delaying relay (relay.py) on this namespace's loopback,
                  except the relay's own (marked) connections
"""

from __future__ import annotations

FILTER_FAMILY = "inet"
NAT_FAMILY = "ip"          # the redirect (IPv4 nodes)
FILTER_PRIORITY = 0
NAT_OUTPUT_PRIORITY = -100


def address_set(addresses) -> str:
    return "{ " + ", ".join(addresses) + " }"


def _table(family: str, name: str, chains: dict[str, tuple[str, list[str]]]) -> str:
    """A table of base chains: chain name -> (its hook line, its rules)."""
    lines = [f"table {family} {name} {{"]
    for chain, (hook, rules) in chains.items():
        lines += [f"  chain {chain} {{", f"    {hook}; policy accept;"]
        lines += [f"    {rule}" for rule in rules]
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _filter(hook: str) -> str:
    return f"type filter hook {hook} priority {FILTER_PRIORITY}"


def block_table(name: str, peers) -> str:
    peers = address_set(peers)
    return _table(FILTER_FAMILY, name, {
        "input": (_filter("input"), [f"ip saddr {peers} drop"]),
        "output": (_filter("output"), [f"ip daddr {peers} drop"]),
    })


def loss_table(name: str, peers, percent: int) -> str:
    return _table(FILTER_FAMILY, name, {
        "output": (_filter("output"),
                   [f"ip daddr {address_set(peers)} numgen random mod 100 < {percent} drop"]),
    })


def reset_table(name: str, peers, connect_percent: int, packet_permille: int) -> str:
    peers = address_set(peers)
    return _table(FILTER_FAMILY, name, {
        "input": (_filter("input"), [
            f"ip saddr {peers} tcp flags & (syn | ack) == syn "
            f"numgen random mod 100 < {connect_percent} reject with tcp reset",
            f"ip saddr {peers} meta l4proto tcp "
            f"numgen random mod 1000 < {packet_permille} reject with tcp reset",
        ]),
    })


def redirect_table(name: str, targets, relay_port: int, mark: int) -> str:
    """`targets`: the (address, bus port) of every other node."""
    pairs = "{ " + ", ".join(f"{address} . {port}" for address, port in targets) + " }"
    return _table(NAT_FAMILY, name, {
        "output": (f"type nat hook output priority {NAT_OUTPUT_PRIORITY}",
                   [f"meta mark != {mark:#x} ip daddr . tcp dport {pairs} "
                    f"redirect to :{relay_port}"]),
    })
