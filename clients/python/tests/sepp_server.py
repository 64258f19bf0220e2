"""A real ``sepp serve`` for the tests: started on a free loopback port with a
temporary data directory, killed with SIGKILL and restarted on the same port
and directory for the crash tests.

The binary comes from ``SEPP_BIN``; when it is unset it is built once with
``go build -o <tmp>/sepp ./cmd/sepp`` in the repository root (../..).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import List, Optional

CLIENT_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = CLIENT_DIR.parent.parent

_built: Optional[str] = None
_build_lock = threading.Lock()


def sepp_binary() -> str:
    """The path of the sepp binary: SEPP_BIN, or one built from the repo."""
    global _built
    env = os.environ.get("SEPP_BIN")
    if env:
        if not os.access(env, os.X_OK):
            raise RuntimeError(f"SEPP_BIN={env} is not an executable file")
        return env
    with _build_lock:
        if _built is None:
            out = Path(tempfile.mkdtemp(prefix="sepp-py-bin-")) / "sepp"
            subprocess.run(["go", "build", "-o", str(out), "./cmd/sepp"], cwd=REPO_ROOT, check=True)
            _built = str(out)
        return _built


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SeppServer:
    """One ``sepp serve`` process. ``url`` stays the same across restarts."""

    def __init__(self, config: str = "", port: Optional[int] = None) -> None:
        self.dir = tempfile.mkdtemp(prefix="sepp-py-test-")
        self.data = os.path.join(self.dir, "data")
        self.config_path: Optional[str] = None
        if config.strip():
            self.config_path = os.path.join(self.dir, "sepp.toml")
            with open(self.config_path, "w") as f:
                f.write(config)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log_path = os.path.join(self.dir, "server.log")
        self.start()

    def start(self, timeout: float = 60.0) -> None:
        """Starts the server and waits for "sepp serving" on its stderr."""
        cmd: List[str] = [sepp_binary(), "serve"]
        if self.config_path:
            cmd += ["--config", self.config_path]
        env = dict(os.environ, SEPP_LISTEN=f"127.0.0.1:{self.port}", SEPP_STORAGE_PATH=self.data)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert self.proc.stderr is not None
        deadline = time.monotonic() + timeout
        seen: List[bytes] = []
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for line in self.proc.stderr:
                log.write(line)
                log.flush()
                if not ready.is_set():
                    seen.append(line)
                    if b"sepp serving" in line:
                        ready.set()
            log.close()

        threading.Thread(target=pump, daemon=True).start()
        while not ready.wait(0.05):
            if self.proc.poll() is not None:
                raise RuntimeError(f"sepp serve exited with {self.proc.returncode}:\n" + b"".join(seen).decode(errors="replace"))
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("sepp serve did not log 'sepp serving' in time:\n" + b"".join(seen).decode(errors="replace"))

    def kill(self) -> None:
        """Kills the server with SIGKILL (a crash) and reaps it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        """Starts the server again on the same port and data directory."""
        deadline = time.monotonic() + 30
        while True:
            try:
                self.start()
                return
            except RuntimeError:
                # The port can take a moment to be free again.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        """Stops the server gracefully (SIGTERM), or kills it, and removes
        its directory."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)
