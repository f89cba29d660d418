"""A real-process chaos checker: `disque-py chaos` (and `make chaos`).

Starts N disque-server processes on 127.0.0.1 (or, for the network faults,
each in a network namespace of its own), joins them, and runs a workload's
real clients against random nodes while a fault injector hits them with
the kinds of fault asked for (kill -9, SIGSTOP, partitions, ...: faults/);
then brings everything back, drains the queues and checks the clients'
record: no job acknowledged by ADDJOB is lost, none delivered that was
never added, no promise of the workload broken, no server crashed;
duplicates, deliveries after an acknowledged ACKJOB and delays are counted
and reported.

  nodes.py     one server process: start, kill, pause, restart, logs
  link.py      a client connection that never hangs and classifies failures
  cluster.py   the nodes as a cluster: form, full mesh, job views, stop
  ledger.py    what the clients saw, and the total-queue checks over it
  workloads/   the loads (plain, backlog, dedup, ...): their clients and their own checks
  faults/      the kinds of fault, and the injector that draws and undoes them
  netns.py     the run's own network: bridge, namespaces, veths (network faults)
  nft_rules.py the nftables rules of the network faults, as text
  relay.py     the delaying TCP relay behind netem's slow links
  report.py    the report and the exit status
  explain.py   the words for a lost job, a delivery after an ack, and faults.txt
  run.py       the phases of a run; run(ChaosOptions) -> Report
  disque_c.py  what a run on Disque C's server (--disque-c) may ask for
  matrix.py    `make chaos`: the rows of fault sets x workloads, run and tabled

The click command lives in disque_py/tools/cli.py and imports run.py on use, so
that `disque-server`, which loads the CLI module, does not load redis-py.
"""
