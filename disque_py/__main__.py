"""`python -m disque_py` behaves like the disque-server binary."""

from disque_py.tools.cli import server_main

server_main()
