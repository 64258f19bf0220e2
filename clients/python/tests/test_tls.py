"""TLS and token options of connect(), through a TLS terminator on loopback
(like a load balancer in front of Sepp) that forwards the bytes to the real
server; the server's own TLS is tested in the Go suite (cmd/sepp/tls_test.go). Certificates come from a throwaway CA made with
the openssl CLI."""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import tempfile
from typing import AsyncIterator, Dict

import pytest

import sepp
from sepp import EnqueueRequest, SeppClient
from sepp_server import SeppServer


def _openssl(*args: str, cwd: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs() -> Dict[str, str]:
    d = tempfile.mkdtemp(prefix="sepp-py-tls-")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=sepp test CA", cwd=d)
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1\n"), ("client", "extendedKeyUsage=clientAuth\n")):
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(ext)
        _openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    return {k: os.path.join(d, k) for k in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")}


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, tap: "list[bytes] | None" = None) -> None:
    try:
        while data := await reader.read(65536):
            if tap is not None:
                tap.append(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


class _Terminator:
    """Accepts TLS on a loopback port and forwards the plain bytes to the
    real server's port."""

    def __init__(self) -> None:
        self.tasks: "set[asyncio.Task[object]]" = set()
        self.srv: "asyncio.AbstractServer | None" = None
        #: The bytes clients sent, as forwarded.
        self.sent: "list[bytes]" = []

    async def start(self, target_port: int, ctx: "ssl.SSLContext | None") -> str:
        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self.tasks.add(task)
            try:
                ur, uw = await asyncio.open_connection("127.0.0.1", target_port)
                await asyncio.gather(_pipe(r, uw, self.sent), _pipe(ur, w))
            finally:
                self.tasks.discard(task)

        self.srv = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
        scheme = "https" if ctx is not None else "http"
        return f"{scheme}://127.0.0.1:{self.srv.sockets[0].getsockname()[1]}"

    async def close(self) -> None:
        assert self.srv is not None
        self.srv.close()
        for t in list(self.tasks):
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@pytest.fixture
async def tls_addr(server: SeppServer, certs: Dict[str, str]) -> AsyncIterator[str]:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs["server.pem"], certs["server.key"])
    t = _Terminator()
    yield await t.start(server.port, ctx)
    await t.close()


@pytest.fixture
async def mtls_addr(server: SeppServer, certs: Dict[str, str]) -> AsyncIterator[str]:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=certs["ca.pem"])
    ctx.load_cert_chain(certs["server.pem"], certs["server.key"])
    ctx.verify_mode = ssl.CERT_REQUIRED
    t = _Terminator()
    yield await t.start(server.port, ctx)
    await t.close()


async def test_https_with_a_ca_bundle(tls_addr: str, certs: Dict[str, str], queue: str) -> None:
    async with SeppClient.connect(tls_addr, verify=certs["ca.pem"]) as c:
        ack = await c.enqueue(EnqueueRequest(queue, "t", idempotency_key="tls-1"))
        assert (await c.get_job(ack.job_id)).idempotency_key == "tls-1"


async def test_an_unknown_ca_is_refused(tls_addr: str) -> None:
    with pytest.raises(sepp.UnavailableError, match="cannot reach the server"):
        await SeppClient.connect(tls_addr)  # the system's CAs do not know ours


async def test_mutual_tls_with_a_client_certificate(mtls_addr: str, certs: Dict[str, str], queue: str) -> None:
    async with SeppClient.connect(mtls_addr, verify=certs["ca.pem"], cert=(certs["client.pem"], certs["client.key"])) as c:
        assert not (await c.enqueue(EnqueueRequest(queue, "t", idempotency_key="mtls-1"))).deduplicated
    with pytest.raises(sepp.UnavailableError):
        async with SeppClient.connect(mtls_addr, verify=certs["ca.pem"]) as c:  # no client certificate
            await c.enqueue(EnqueueRequest(queue, "t"))


async def test_bearer_token_goes_out_on_every_call(server: SeppServer, queue: str) -> None:
    """The token is sent as Authorization: Bearer on every call (seen on the
    wire by a plain forwarder in front of the real server, which does not
    check tokens yet)."""
    tap = _Terminator()
    addr = await tap.start(server.port, None)
    try:
        async with SeppClient.connect(addr, token="s3cret-token") as c:
            await c.enqueue(EnqueueRequest(queue, "t", idempotency_key="tok-1"))
            await c.lookup_idempotency_key(queue, "tok-1")
        wire = b"".join(tap.sent).lower()
        assert wire.count(b"post /") == 3  # health, enqueue, lookup
        assert wire.count(b"authorization: bearer s3cret-token") == 3
    finally:
        await tap.close()
