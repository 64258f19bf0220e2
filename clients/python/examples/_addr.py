"""The server address the examples use: argv[1], else $SEPP_ADDR, else the
default http://127.0.0.1:50051."""

import os
import sys


def address() -> str:
    """The server to talk to."""
    if len(sys.argv) > 1:
        return sys.argv[1]
    return os.environ.get("SEPP_ADDR", "http://127.0.0.1:50051")
