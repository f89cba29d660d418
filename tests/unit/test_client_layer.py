"""The client is a layer of its own: an application that imports
disque_py.client (and runs a Worker) loads neither the compiled engine nor
any part of the server."""

import subprocess
import sys

SERVER_SIDE = ("disque_py.engine", "disque_py.server", "disque_py.commands", "disque_py.node",
               "disque_py.cluster", "disque_py.persistence", "disque_py.config",
               "disque_py.formats", "disque_py.web", "disque_py.monitoring")

PROBE = """
import sys
import disque_py.client
from disque_py.client.worker import Worker
print("\\n".join(sorted(name for name in sys.modules if name.startswith("disque_py"))))
"""


def test_importing_the_client_loads_no_engine_and_no_server():
    loaded = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                            check=True).stdout.split()
    assert "disque_py.client.worker" in loaded
    assert [name for name in loaded if name.startswith(SERVER_SIDE)] == []
