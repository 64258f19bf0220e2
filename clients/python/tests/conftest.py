"""Fixtures: a real ``sepp serve`` per session (and per test where a test
needs its own configuration or crashes the server), and clients of it."""

from __future__ import annotations

import itertools
import os
import sys
import uuid
from typing import AsyncIterator, Callable, Iterator, List

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from sepp_server import SeppServer  # noqa: E402

import sepp  # noqa: E402


@pytest.fixture(scope="session")
def server() -> Iterator[SeppServer]:
    """One server with the default configuration, shared by the tests that
    need nothing special (each uses queues of its own)."""
    srv = SeppServer()
    yield srv
    srv.stop()


@pytest.fixture
def make_server() -> Iterator[Callable[..., SeppServer]]:
    """Starts servers with a configuration of the test's own; stops them at
    the end of the test."""
    started: List[SeppServer] = []

    def make(config: str = "") -> SeppServer:
        srv = SeppServer(config)
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()


@pytest.fixture
async def client(server: SeppServer) -> AsyncIterator[sepp.SeppClient]:
    """A client of the shared server."""
    async with sepp.SeppClient.connect(server.url) as c:
        yield c


_counter = itertools.count()


@pytest.fixture
def queue() -> str:
    """A queue name no other test uses."""
    return f"q-{uuid.uuid4().hex[:12]}-{next(_counter)}"
