"""The tools layer: command-line programs around the server, outside the
runtime's import path (nothing the server runs imports them).

    server_cli.py   disque-server (and python -m disque_py)
    launcher.py     disque: redis-cli on port 7711, importing nothing of ours
    cli.py          disque-py: server, cluster, check-aof, chaos
    cluster_cli.py  disque-py cluster: make and inspect a cluster
    check_aof.py    disque-py check-aof
    chaos/          the real-process fault checker (disque-py chaos)
    loopback.py     disque-server processes on loopback, for the tools, the
                    tests and the benchmarks
    pki.py          a throwaway certificate authority (TLS tests, benchmarks)
    large_aof.py    large AOFs written directly (the load and progress tests)
"""
