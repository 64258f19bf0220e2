"""The package's modules import each other in layers, never in a cycle: the
batcher is handed a send function and knows nothing of the client; effect
and worker depend on the client, never the reverse (reads the sources; needs
no server)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "sepp"


def _imports() -> Dict[str, Set[str]]:
    """The sepp modules each hand-written module of the package imports,
    under TYPE_CHECKING too (a cycle there is one all the same)."""
    graph: Dict[str, Set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        name = path.stem
        deps: Set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sepp."):
                deps.add(node.module.split(".")[1])
        # Only modules count: "from . import __version__" (read when a
        # client connects) takes an attribute of the package, not a layer.
        graph[name] = {d for d in deps if (PACKAGE / f"{d}.py").exists() or (PACKAGE / d).is_dir()} - {name}
    return graph


def test_no_cycle() -> None:
    graph = _imports()
    done: Set[str] = set()

    def visit(name: str, path: List[str]) -> None:
        if name in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(name):] + [name]))
        if name in done:
            return
        for dep in graph.get(name, ()):
            visit(dep, path + [name])
        done.add(name)

    for name in graph:
        visit(name, [])


def test_layers() -> None:
    graph = _imports()
    assert {"client", "__init__"}.isdisjoint(graph["_batcher"]), graph["_batcher"]
    for low in ("client", "_batcher", "types", "errors", "_wire", "retry"):
        assert {"effect", "worker", "idempotency", "outbox"}.isdisjoint(graph[low]), (low, graph[low])
    assert "client" in graph["effect"] and "client" in graph["worker"]
    # The outbox writer needs no client (it writes rows, not RPCs), and
    # neither it nor the middleware is imported by the package itself.
    assert "client" not in graph["outbox"] and "client" in graph["idempotency"]
    assert {"idempotency", "outbox"}.isdisjoint(graph["__init__"]), graph["__init__"]


def test_optional_dependencies_are_not_imported() -> None:
    """``import sepp``, ``sepp.idempotency`` and ``sepp.outbox`` load no web
    framework and no database driver."""
    import subprocess
    import sys

    code = (
        "import sys, sepp, sepp.idempotency, sepp.outbox; "
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('starlette', 'fastapi', 'uvicorn', 'psycopg', 'psycopg2')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"PYTHONPATH": str(PACKAGE.parent)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
