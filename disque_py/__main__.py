"""`python -m disque_py` behaves like the disque-server binary."""

from disque_py.tools.server_cli import server_main

server_main()
