"""Fixtures of the client's tests (test_client*.py): the client matrix
over one module-scoped server (tests/client_support.py says what a cell
is), and the server's own view of each answer through plain redis-py.
"""

from __future__ import annotations

import pytest

from tests.client_support import FLAVOURS, ClientMaker, unique
from tests.support import HOST


@pytest.fixture(params=FLAVOURS, ids=lambda flavour: flavour.id)
def flavour(request):
    return request.param


@pytest.fixture
def make_client(flavour):
    """make_client(url, **options): a client of the test's flavour."""
    maker = ClientMaker(flavour)
    yield maker
    maker.close()


@pytest.fixture
def dq(make_client, module_server):
    """A client of the test's flavour on the module's server."""
    return make_client(f"disque://{HOST}:{module_server.port}")


@pytest.fixture
def view(module_server):
    """The server's answers as redis-py's RESP2 reads them, for comparison."""
    return module_server.client(protocol=2)


@pytest.fixture
def queue():
    return unique()
