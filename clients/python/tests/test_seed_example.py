"""Acceptance 1: the seed page's Python example, saved as
examples/idempotency.py, runs unchanged against a fresh ``sepp serve``: the
first run prints ``enqueued <id>``, the second ``already enqueued earlier as
<same id>``."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from sepp_server import CLIENT_DIR, sepp_binary

SEED = CLIENT_DIR.parent.parent.parent / "shared" / "seeds" / "000_53250bbd0079ab6d.txt"


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _run_twice() -> list:
    script = str(Path(__file__).with_name("netns_seed_run.py"))
    env = dict(os.environ, SEPP_BIN=sepp_binary())
    # A network namespace of our own: its loopback's port 50051 is free
    # whatever runs on the host's.
    p = subprocess.run(["unshare", "-n", sys.executable, script], env=env, capture_output=True, text=True, timeout=180)
    if p.returncode == 0:
        return json.loads(p.stdout.strip().splitlines()[-1])
    if not _port_free(50051):
        raise AssertionError(
            "cannot make a network namespace (unshare -n failed: " + p.stderr.strip()[-300:]
            + ") and the host's port 50051 is taken: the seed example names localhost:50051"
        )
    p = subprocess.run([sys.executable, script, "--host"], env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_seed_example_runs_unchanged() -> None:
    runs = _run_twice()
    for r in runs:
        assert r["rc"] == 0, r["stderr"]
    first = re.fullmatch(r"enqueued (\S+)\n", runs[0]["stdout"])
    assert first, runs[0]
    job_id = first.group(1)
    assert runs[1]["stdout"] == f"already enqueued earlier as {job_id}\n", runs[1]


def test_example_file_is_the_seed_snippet() -> None:
    """examples/idempotency.py is the seed's snippet, unchanged, plus the two
    lines that run it."""
    example = (CLIENT_DIR / "examples" / "idempotency.py").read_text()
    tail = '\nif __name__ == "__main__":\n    asyncio.run(main())\n'
    assert example.endswith(tail)
    snippet = example[: -len(tail)]
    if SEED.exists():
        text = SEED.read_text()
        start = text.index("import asyncio\nfrom sepp import")
        end = text.index('print(f"enqueued {ack.job_id}")', start) + len('print(f"enqueued {ack.job_id}")')
        assert snippet.rstrip("\n") == text[start:end]
