"""The house rules the code keeps, checked on every run: rooms in server/ (at most 12 modules
at its top), no function over 60 lines, no import circle between modules of the product, and
server/'s layers that only look down (:data:`SERVER_LAYERS`), no function on a downstream
call's paths (:data:`CALL_PATHS`) that production code never calls, and no store protocol of
more than twelve methods."""

from __future__ import annotations

import ast
import importlib
import inspect
import typing
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
CALL_PATHS = (
    "server/transport/stdio.py",
    "server/transport/passthrough.py",
    "server/host/gateway_tools.py",
    "server/gateway/gateway.py",
    "server/gateway/calls.py",
    "server/gateway/links/connection.py",
    "server/gateway/links/stdio_link.py",
    "server/wire/jsonrpc_lines.py",
    "server/wire/results.py",
)
"""The modules a downstream tool call passes through, from the host's bytes to the server's."""
MAX_STORE_METHODS = 12
STORE_MODULES = ("contextcore.store", "contextcore.store_roles", "contextcore.store_records")
"""Where the session store's protocols live."""


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


def _named(node: ast.AST, owner: str | None, out: dict[str | None, set[str]]) -> None:
    """Every name ``node`` uses (called, passed on, imported; not in a docstring), by the
    innermost function it stands in (None: module level)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        owner = node.name
    names = out.setdefault(owner, set())
    if isinstance(node, ast.Name):
        names.add(node.id)
    elif isinstance(node, ast.Attribute):
        names.add(node.attr)
    elif isinstance(node, ast.ImportFrom):
        names.update(a.name for a in node.names)
    for child in ast.iter_child_nodes(node):
        _named(child, owner, out)


def _uncalled(defined: dict[str, str], sources: list[str]) -> list[str]:
    """The functions of ``defined`` (name: where) that production code does not reach: a name
    is reached when module-level code or a function outside ``defined`` uses it, or a
    reached function does, so a chain that only tests start is unreached as a whole (a
    docstring or comment does not count)."""
    uses: list[tuple[str | None, set[str]]] = []
    for source in sources:
        by_owner: dict[str | None, set[str]] = {}
        _named(ast.parse(source), None, by_owner)
        uses += by_owner.items()
    reached = set().union(*(names for owner, names in uses if owner not in defined))
    while True:
        more = set().union(*(names for owner, names in uses if owner in reached)) - reached
        if not more:
            return sorted(where for name, where in defined.items() if name not in reached)
        reached |= more


def _functions(path: Path) -> dict[str, str]:
    out = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name[:2] != "__":
            out[node.name] = f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
    return out


def test_every_function_on_the_call_paths_has_a_production_caller() -> None:
    """Tests alone keep no function alive on the paths of a downstream call."""
    defined: dict[str, str] = {}
    for path in CALL_PATHS:
        defined |= _functions(ROOT / path)
    sources = [p.read_text(encoding="utf-8") for p in _modules().values()]
    assert not _uncalled(defined, sources), f"no production caller: {_uncalled(defined, sources)}"


def test_the_caller_check_finds_a_chain_only_a_docstring_or_tests_start() -> None:
    source = (
        'def used():\n    """Not :func:`spare`."""\n\n'
        "def spare():\n    return chained()\n\n"
        "def chained():\n    return 1\n\n"
        "used()\n"
    )
    defined = {"used": "used", "spare": "spare", "chained": "chained"}
    assert _uncalled(defined, [source]) == ["chained", "spare"]


def _protocol_methods(protocol: type) -> set[str]:
    """Every method a protocol asks for, those it inherits included."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls not in (object, typing.Protocol, typing.Generic):
            names |= {n for n, v in vars(cls).items() if callable(v) and n[:1] != "_"}
    return names


def test_the_largest_store_protocol_has_at_most_twelve_methods() -> None:
    """The session store is built from role protocols, none wider than twelve methods."""
    sizes = {}
    for name in STORE_MODULES:
        for value in vars(importlib.import_module(name)).values():
            if inspect.isclass(value) and getattr(value, "_is_protocol", False):
                sizes[f"{name}.{value.__qualname__}"] = len(_protocol_methods(value))
    assert sizes and max(sizes.values()) <= MAX_STORE_METHODS, sizes
