"""Every example in examples/ runs against a real server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from sepp_server import CLIENT_DIR, SeppServer

ENV = dict(os.environ, PYTHONPATH=str(CLIENT_DIR / "src"))


@pytest.mark.parametrize(
    "name,expect",
    [
        ("enqueue.py", "again: deduplicated=True same id=True"),
        ("batch.py", "atomic batch written, deduplicated: [False, True]"),
        ("keys.py", "after release: a new job"),
        ("errors.py", "refused locally, nothing sent: IdempotencyKeyTooLongError"),
        ("effect_mail.py", "mails sent: 1"),
    ],
)
def test_example_runs(server: SeppServer, name: str, expect: str) -> None:
    p = subprocess.run(
        [sys.executable, str(CLIENT_DIR / "examples" / name), server.url],
        env=ENV, capture_output=True, text=True, timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert expect in p.stdout, p.stdout


def test_worker_example_stops_on_sigterm(server: SeppServer) -> None:
    p = subprocess.Popen(
        [sys.executable, str(CLIENT_DIR / "examples" / "worker.py"), server.url],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert p.stderr is not None
        for line in p.stderr:  # the signal handlers are installed once it has started
            if "started" in line:
                break
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert "got SIGTERM, shutting down gracefully" in err and "stopped" in err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
