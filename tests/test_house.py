"""The house rules the code keeps, checked on every run: rooms in server/ (at most 12 modules
at its top), no function over 60 lines, no import circle between modules of the product, and
server/'s layers that only look down (:data:`SERVER_LAYERS`)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("contextcore", "tools", "server")
MAX_TOP_MODULES = 12
MAX_FUNCTION_LINES = 60
SERVER_LAYERS = (
    # the ground: what every layer above may use
    (
        "settings",
        "version",
        "terminal",
        "redaction",
        "summarizers",
        "wire",
        "stores",
        "embedding",
        "ui",
    ),
    ("gateway", "parts"),  # downstream servers; the domain's parts built from the settings
    ("observability", "reload"),  # metrics and traces; config hot reload
    ("host",),  # what serves hosts: the MCP server, the broker's and the gateway's tools
    ("transport",),  # stdio (with the pass-through), Streamable HTTP, SSE, the HTTP routes
    ("runtime",),  # the one composition root
    ("app",),  # serve
    ("cli",),  # the command line
)
"""server/'s rooms from the ground up: a module imports from its own layer or those below."""


def _modules() -> dict[str, Path]:
    """Every module of the product by dotted name (a package by its ``__init__``)."""
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            if package != "contextcore":  # installed as context_broker.server, ...tools
                parts.insert(0, "context_broker")
            out[".".join(parts)] = path
    return out


def _imported(
    name: str, path: Path, modules: dict[str, Path], *, deferred: bool = False
) -> set[str]:
    """The product's modules ``name`` imports at module level (not inside functions, which
    is how a module defers an import on purpose); with ``deferred``, those too."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree) if deferred else tree.body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join([*base, node.module] if node.module else base)
            if node.level == 0:
                target = node.module or ""
            submodules = {f"{target}.{a.name}" for a in node.names} & modules.keys()
            # "from package import submodule" imports the submodule, not the package's names
            found |= submodules or ({target} & modules.keys())
    return found - {name}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return groups


def test_server_keeps_at_most_twelve_modules_at_its_top() -> None:
    top = sorted(p.name for p in (ROOT / "server").glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, f"{len(top)} modules at server/'s top: {top}"


def test_no_function_is_longer_than_sixty_lines() -> None:
    long = []
    for path in _modules().values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines})")
    assert not long, "functions over 60 lines: " + ", ".join(long)


def test_no_import_circle_between_modules() -> None:
    modules = _modules()
    graph = {name: _imported(name, path, modules) for name, path in modules.items()}
    assert not _circles(graph), f"import circles: {_circles(graph)}"


def test_the_circle_check_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _layer(module: str) -> int | None:
    """The index in :data:`SERVER_LAYERS` of a module of server/ (None: not of server/)."""
    prefix = "context_broker.server."
    if not module.startswith(prefix):
        return None
    room = module.removeprefix(prefix).split(".")[0]
    found = [i for i, rooms in enumerate(SERVER_LAYERS) if room in rooms]
    assert found, f"server/{room} is in no layer of SERVER_LAYERS: name its layer"
    return found[0]


def _upward(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, targets in sorted(graph.items()):
        here = _layer(module)
        for target in sorted(targets):
            there = _layer(target)
            if here is not None and there is not None and there > here:
                out.append(f"{module} -> {target}")
    return out


def test_server_layers_only_look_down() -> None:
    """No import, at module level or deferred inside a function, runs from a layer of server/
    to one above it."""
    modules = _modules()
    graph = {n: _imported(n, p, modules, deferred=True) for n, p in modules.items()}
    assert not _upward(graph), "imports that run up: " + ", ".join(_upward(graph))


def test_the_layer_check_finds_an_import_that_runs_up() -> None:
    graph = {
        "context_broker.server.gateway.gateway": {"context_broker.server.host.mcp_server"},
        "context_broker.server.host.mcp_server": {"context_broker.server.gateway.gateway"},
    }
    assert _upward(graph) == [
        "context_broker.server.gateway.gateway -> context_broker.server.host.mcp_server"
    ]
