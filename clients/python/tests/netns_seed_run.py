"""Runs examples/idempotency.py twice against a fresh ``sepp serve`` on
localhost:50051, the address the seed's example names, and prints the two
outputs as JSON.

The test runs this script inside a new network namespace (``unshare -n``),
where port 50051 of a loopback of its own is always free, so the example runs
unchanged without taking the host's port. Run directly (``--host``) it uses
the host's 127.0.0.1:50051, which must then be free.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))

from sepp_server import CLIENT_DIR, SeppServer  # noqa: E402


def main() -> None:
    if "--host" not in sys.argv:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    srv = SeppServer(port=50051)
    try:
        example = CLIENT_DIR / "examples" / "idempotency.py"
        env = dict(os.environ, PYTHONPATH=str(CLIENT_DIR / "src"))
        runs = []
        for _ in range(2):
            p = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=60)
            runs.append({"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr})
        print(json.dumps(runs))
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
