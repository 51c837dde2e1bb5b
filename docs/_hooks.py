"""MkDocs hook: writes the reference pages' generated parts from the code, so they cannot drift.

A page holds a line ``<!-- generated: NAME -->``; :func:`on_page_markdown` replaces it with
the Markdown of NAME:

    config   every table and key of ``server.settings.AppConfig`` (the domain's tables of
             ``contextcore.config`` included): type, default, and what it does, taken from
             ``config.example.toml``'s comment for the key, else from the comment or
             docstring beside the field in the settings model
    tools    every tool the broker answers: the tool specs of ``tools.all_tools`` and the
             request-context view, then the gateway's ``call_tool``, ``run_code`` and
             ``list_servers``;
             name, description, arguments (from the input schema), result fields, and
             whether ``[server] tools = "model"`` lists it
    cli      the ``context-broker`` command's help, from its argument parser

The hook imports the project, so MkDocs must run with the project's Python
(``.venv/bin/mkdocs``). ``tests/docs`` imports this module by its path.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import textwrap
import tomllib
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "config.example.toml"
MARKER = re.compile(r"^<!-- generated: ([a-z]+) -->$", re.M)
# Tables keyed by a name of the user's: [servers.NAME], [profiles.NAME], [models.NAME].
NAME = "NAME"


# --- config.example.toml: the comment written for each key ----------------------------------


_EXAMPLE_DEFAULT = re.compile(r'^default:? ("[^"]*"|\S+)$')


def _split_inline(body: str) -> tuple[str, str]:
    """``key = value  # comment`` → (``key = value``, ``comment``); a ``#`` inside a quoted
    string is part of the value."""
    quote = ""
    for i, char in enumerate(body):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#":
            return body[:i].rstrip(), body[i + 1 :].strip()
    return body, ""


def _normalized(table: str, schema: type[BaseModel]) -> str:
    """A table path as the schema names it (``servers.time.tools.x`` is
    ``servers.NAME.tools.NAME``)."""
    parts: list[str] = []
    model: type[BaseModel] | None = schema
    named = False
    for part in table.split("."):
        if named:
            parts.append(NAME)
            named = False
            continue
        parts.append(part)
        field = model.model_fields.get(part) if model is not None else None
        model, named = _nested(field.annotation) if field is not None else (None, False)
    return ".".join(parts)


def _nested(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a field's value is (or holds), and whether it is keyed by a name."""
    origin, args = get_origin(annotation), get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if origin is dict and _is_model(args[1]):
        return args[1], True
    if origin is tuple and args and _is_model(args[0]):
        return args[0], False
    if origin in (Union, types.UnionType):
        for arg in args:
            if _is_model(arg):
                return arg, False
    return None, False


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def example_comments(text: str, schema: type[BaseModel]) -> dict[str, str]:
    """``dotted.key`` (named tables as ``NAME``) → the comment ``config.example.toml`` writes
    for it ("" for none): the comment block above it and its own comment at the end of the
    line; a key written right below another with neither shares the block above that one
    when it names the same kind of thing (see :func:`_shares`). Commented-out keys and tables
    count too; a table's own comment is kept under ``[table]``."""
    comments: dict[str, str] = {}
    table, block, group, last = "", [], "", ""
    lines = iter(text.splitlines())
    for raw in lines:
        commented = raw.strip().startswith("#")
        body = raw.strip().lstrip("#").strip()
        if not body:
            block, group, last = [], "", ""
        elif commented and body.startswith("#") and last:  # continued below the line's comment
            comments[last] = f"{comments[last]} {body.lstrip('#').strip()}".strip()
        elif (header := _HEADER.match(body)) is not None:
            table = _normalized(header[1], schema)
            block, group, last = [], "", f"[{table}]"
            comments[last] = (header[2] or "").lstrip("#").strip()
        elif (line := _key_line(body)) is None:
            block, last = [*block, body], ""
        else:
            key, value, inline = line
            if value == "[" or (value.startswith("[") and not value.endswith("]")):
                _skip_array(lines)
            name = f"{table}.{key}" if table else key
            if block:
                group, note = " ".join(block), " ".join([*block, inline]).strip()
            else:
                shared = group if last and _shares(key, last.rsplit(".", 1)[-1], group) else ""
                note = inline or shared
            comments[name] = comments.get(name) or note
            block, last = [], name
    return comments


_HEADER = re.compile(r"^\[\[?([A-Za-z0-9_.-]+)\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^([a-z_][a-z0-9_]*)\s*=\s*(.+)$")


def _key_line(body: str) -> tuple[str, str, str] | None:
    """(key, value, its comment) when ``body`` is a ``key = value`` line of TOML."""
    match = _KEY.match(body)
    if match is None:
        return None
    value, inline = _split_inline(match[2])
    if _EXAMPLE_DEFAULT.match(inline):  # says what the default is when the example differs
        inline = ""
    if not value.startswith("["):
        try:
            tomllib.loads(f"v = {value}")
        except tomllib.TOMLDecodeError:
            return None  # prose such as "key=value string)"
    return match[1], value, inline


def _shares(key: str, previous: str, comment: str) -> bool:
    """Whether the comment above ``previous`` speaks for ``key`` written right below it: the
    two name the same kind of thing (``backoff_base``, ``backoff_max``) or it names ``key``."""
    return (
        key.split("_")[0] == previous.split("_")[0] or re.search(rf"\b{key}\b", comment) is not None
    )


def _skip_array(lines: Iterator[str]) -> None:
    """Past the rest of a multi-line array value (its items are not keys)."""
    for raw in lines:
        if raw.lstrip("#").strip().startswith("]"):
            return


# --- the settings models ---------------------------------------------------------------------


def _source_notes(model: type[BaseModel]) -> dict[str, str]:
    """Field → the comment above it or the docstring below it in the model's source."""
    try:
        source = textwrap.dedent(inspect.getsource(model))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    notes: dict[str, str] = {}
    for i, node in enumerate(body.body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above = []
        row = node.lineno - 2
        while row >= 0 and lines[row].strip().startswith("#"):
            above.insert(0, lines[row].strip().lstrip("#").strip())
            row -= 1
        after = body.body[i + 1] if i + 1 < len(body.body) else None
        if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            above.append(" ".join(str(after.value.value).split()))
        if above:
            notes[node.target.id] = " ".join(above)
    return notes


def _rst(text: str) -> str:
    """Docstring markup as Markdown: ``x`` → `x`."""
    return text.replace("``", "`")


def _doc(model: type[BaseModel]) -> str:
    """The model's docstring as one paragraph."""
    doc = inspect.getdoc(model) or ""
    if model.__doc__ is None or doc == inspect.getdoc(BaseModel):
        return ""
    return _rst(" ".join(doc.split("\n\n")[0].split()))


def _constraints(info: FieldInfo) -> list[str]:
    shown = []
    for item in info.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            if getattr(item, attr, None) is not None:
                shown.append(f"{sign} {getattr(item, attr)}")
        for attr, what in (("min_length", "at least"), ("max_length", "at most")):
            if getattr(item, attr, None) is not None:
                shown.append(f"{what} {getattr(item, attr)} long")
        if getattr(item, "pattern", None):
            shown.append(f"matching `{item.pattern}`")
    return shown


def type_text(annotation: Any) -> str:
    """A field's type in the words of the config file."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is type(None):
        return "unset"
    if origin is Literal:
        return " or ".join(f"`{json.dumps(a)}`" for a in args)
    if origin in (Union, types.UnionType):
        kinds = [type_text(a) for a in args if a is not type(None)]
        return " or ".join(kinds)
    if origin is tuple:
        return f"list of {_plural(type_text(args[0]))}" if args else "list"
    if origin is dict:
        value = args[1]
        if value is Any:
            return "table"
        return "table of tables" if _is_model(value) else f"table of {_plural(type_text(value))}"
    if _is_model(annotation):
        return "table"
    names = {bool: "boolean", int: "integer", float: "number", str: "string", Path: "path"}
    if annotation in names:
        return names[annotation]
    return "value" if annotation is Any else str(annotation)


def _plural(kind: str) -> str:
    words = {
        "string": "strings",
        "path": "paths",
        "integer": "integers",
        "table": "tables",
        "object": "objects",
    }
    return " or ".join(words.get(part, part) for part in kind.split(" or "))


def default_text(info: FieldInfo) -> str:
    """A field's default as it would be written in TOML."""
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "(table)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, Path):
        return f"`{json.dumps(str(value))}`"
    if isinstance(value, tuple | list | dict) and not value:
        return "`[]`" if not isinstance(value, dict) else "`{}`"
    return f"`{json.dumps(value)}`"


def _escaped(text: str) -> str:
    """``text`` as Markdown that shows it as written: code spans as they are, and outside
    them no character Markdown would read as markup (``<server>``, ``2**n``, ``a__b``)."""
    parts = re.split(r"(`[^`]*`)", text)
    for i in range(0, len(parts), 2):
        part = parts[i].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        parts[i] = re.sub(r"([*_\\\[\]])", r"\\\1", part)
    return "".join(parts)


def _cell(text: str) -> str:
    """``text`` for one cell of a Markdown table."""
    return _escaped(text.replace("\n", " ")).replace("|", "\\|")


def _subtable(model: type[BaseModel], key: str, above: frozenset[type]) -> type[BaseModel] | None:
    """The model of ``model.key`` when it gets a section of its own: a nested table not
    already above it (a recursive one, such as a component's ``children``, stays a row)."""
    nested, _ = _nested(model.model_fields[key].annotation)
    if key == "base_dir" or nested is None or nested in above or nested is model:
        return None
    return nested


def _tables(
    model: type[BaseModel], table: str, above: frozenset[type] = frozenset()
) -> Iterator[tuple[str, type[BaseModel], bool, frozenset[type]]]:
    """(table, model, whether it is an array of tables, the models above it) for ``model``
    and every table nested in it, each right after its parent."""
    yield table, model, False, above
    for key, info in model.model_fields.items():
        nested = _subtable(model, key, above)
        if nested is None:
            continue
        name = f"{table}.{key}" if table else key
        if _nested(info.annotation)[1]:
            name = f"{name}.{NAME}"
        array = get_origin(info.annotation) is tuple
        for sub, sub_model, sub_array, sub_above in _tables(nested, name, above | {model}):
            yield sub, sub_model, sub_array or (array and sub == name), sub_above


def _heading(table: str, array: bool) -> str:
    return f"[[{table}]]" if array else f"[{table}]"


def config_reference(example: str | None = None) -> str:
    """Markdown: one section per table of the config file, one row per key."""
    from context_broker.server.settings import AppConfig

    text = EXAMPLE.read_text("utf-8") if example is None else example
    comments = example_comments(text, AppConfig)
    out: list[str] = []
    seen: dict[type, str] = {}
    for table, model, array, above in _tables(AppConfig, ""):
        # [[references]] after [[rules]]: one model, so each key means the same.
        out += _section(table, model, array, above, comments, same_as=seen.get(model))
        seen.setdefault(model, _heading(table, array))
    return "\n".join(out)


def _section(
    table: str,
    model: type[BaseModel],
    array: bool,
    above: frozenset[type],
    comments: Mapping[str, str],
    same_as: str | None = None,
) -> list[str]:
    keys = [k for k in model.model_fields if k != "base_dir" and _subtable(model, k, above) is None]
    if table:
        out = [f"## `{_heading(table, array)}`", ""]
        about = _doc(model)
        out += [about, ""] if about else []
        out += [f"Its keys mean what they mean in `{same_as}`.", ""] if same_as else []
    else:
        out = ["## Top level", "", "Keys written before the first `[table]` of the file.", ""]
    if not keys:
        return [*out, "Only the tables below.", ""]
    notes = _source_notes(model)
    out += ["| key | type | default | what it does |", "| --- | --- | --- | --- |"]
    for key in keys:
        info = model.model_fields[key]
        dotted = f"{table}.{key}" if table else key
        note = comments.get(dotted) or _rst(notes.get(key, "")) or (info.description or "")
        kind = ", ".join([type_text(info.annotation), *_constraints(info)])
        out.append(f"| `{key}` | {_cell(kind)} | {_cell(default_text(info))} | {_cell(note)} |")
    return [*out, ""]


def config_keys() -> list[str]:
    """Every dotted key the config reference shows a row for (named tables as ``NAME``)."""
    from context_broker.server.settings import AppConfig

    return [
        f"{table}.{key}" if table else key
        for table, model, _, above in _tables(AppConfig, "")
        for key in model.model_fields
        if key != "base_dir" and _subtable(model, key, above) is None
    ]


# --- the tools -------------------------------------------------------------------------------


_LIMITS = (
    ("minimum", "≥"),
    ("maximum", "≤"),
    ("minLength", "length ≥"),
    ("maxLength", "length ≤"),
    ("minItems", "items ≥"),
    ("maxItems", "items ≤"),
)


def schema_type(schema: Mapping[str, Any]) -> str:
    """A JSON Schema as a short type, with its limits."""
    if "anyOf" in schema:
        return " or ".join(schema_type(s) for s in schema["anyOf"] if s.get("type") != "null")
    limits = [f"{label} {schema[key]}" for key, label in _LIMITS if key in schema]
    if "enum" in schema:
        text = " or ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    elif schema.get("type") == "array":
        item = schema.get("items", {})
        bare = {k: v for k, v in item.items() if k not in dict(_LIMITS)}
        text = f"list of {_plural(schema_type(bare))}"
        limits = [f"each {label} {item[key]}" for key, label in _LIMITS if key in item] + limits
    else:
        text = schema.get("type", "any")
    return f"{text} ({', '.join(limits)})" if limits else text


def _arguments(schema: Mapping[str, Any], brief: tuple[str, ...] | None) -> list[str]:
    properties = schema.get("properties", {})
    if not properties:
        return ["No arguments.", ""]
    required = set(schema.get("required", ()))
    rows = [
        "| argument | type | required | default | what it is |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, prop in properties.items():
        needed = name in required
        default = "" if needed else f"`{json.dumps(prop.get('default'))}`"
        shown = " (shown to a model)" if brief is not None and name in brief else ""
        cells = [schema_type(prop), "yes" if needed else "no", default, prop.get("description", "")]
        rows.append(f"| `{name}`{shown} | " + " | ".join(_cell(c) for c in cells) + " |")
    return [*rows, ""]


def _result(schema: Mapping[str, Any] | None) -> list[str]:
    if schema is None:
        return ["Result: the downstream tool's own result, as it sent it.", ""]
    fields = ", ".join(f"`{name}`" for name in schema.get("properties", {}))
    return [f"Result (`structuredContent`): {fields}.", ""]


@dataclass(frozen=True)
class ToolEntry:
    """One tool as the reference shows it."""

    name: str
    description: str
    input: Mapping[str, Any]
    output: Mapping[str, Any] | None  # None: the downstream's own result (call_tool)
    read_only: bool
    model: bool  # listed with [server] tools = "model"
    brief: tuple[str, ...] | None = None  # the arguments a model is shown (None: all)
    gateway: bool = False  # answered while any downstream server is configured
    result: str = ""  # what the result is, where no output schema says it


def tool_entries() -> list[ToolEntry]:
    """Every tool the broker answers, in the order hosts list them."""
    from context_broker.server.host.gateway_tools import CALL_TOOL, LIST_SERVERS
    from context_broker.server.host.mcp_server import MODEL_TOOLS, TOOLS
    from context_broker.tools.code import RUN_CODE, RUN_CODE_DESCRIPTION, RunCodeArgs
    from context_broker.tools.gateway import (
        CALL_TOOL_DESCRIPTION,
        LIST_SERVERS_DESCRIPTION,
        CallToolArgs,
        ListServersArgs,
        ListServersResult,
    )

    entries = [
        ToolEntry(
            spec.name,
            spec.description,
            spec.input_schema(),
            spec.output_schema(),
            spec.read_only,
            spec.name in MODEL_TOOLS,
            spec.brief,
        )
        for spec in TOOLS
    ]
    return [
        *entries,
        ToolEntry(
            CALL_TOOL,
            CALL_TOOL_DESCRIPTION,
            CallToolArgs.model_json_schema(),
            None,
            False,
            CALL_TOOL in MODEL_TOOLS,
            gateway=True,
        ),
        ToolEntry(
            RUN_CODE,
            RUN_CODE_DESCRIPTION,
            RunCodeArgs.model_json_schema(),
            None,
            False,
            RUN_CODE in MODEL_TOOLS,
            gateway=True,
            result="Result: text, what the program printed and its last expression's value "
            "(JSON), then the session and the number of tool calls; a tool error with the "
            "line and the message when it did not finish (see [Code mode](../code-mode.md)).",
        ),
        ToolEntry(
            LIST_SERVERS,
            LIST_SERVERS_DESCRIPTION,
            ListServersArgs.model_json_schema(),
            ListServersResult.model_json_schema(),
            True,
            LIST_SERVERS in MODEL_TOOLS,
            gateway=True,
        ),
    ]


def tool_reference() -> str:
    """Markdown: a summary table, then each tool's description, arguments and result."""
    entries = tool_entries()
    out = ['| tool | listed with `tools = "model"` | read-only |', "| --- | --- | --- |"]
    for e in entries:
        model, read_only = "yes" if e.model else "", "yes" if e.read_only else ""
        out.append(f"| [`{e.name}`](#{e.name}) | {model} | {read_only} |")
    out.append("")
    for e in entries:
        out.append(f"### `{e.name}` {{#{e.name}}}\n")
        facts = [
            fact
            for fact, holds in (
                ('listed to hosts by default (`[server] tools = "model"`)', e.model),
                ("answered while any downstream server is configured", e.gateway),
                ("read-only", e.read_only),
            )
            if holds
        ]
        if facts:
            out.append(f"*{'; '.join(facts).capitalize()}.*\n")
        out.append(f"{_escaped(e.description)}\n")
        out += _arguments(e.input, e.brief)
        out += [e.result, ""] if e.result else _result(e.output)
    return "\n".join(out)


# --- the command line ------------------------------------------------------------------------


def _commands(parser: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    yield prefix, parser
    # argparse keeps its subcommands only in its actions.
    for action in parser._actions:
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict) and action.__class__.__name__ == "_SubParsersAction":
            for name, sub in choices.items():
                yield from _commands(sub, f"{prefix} {name}")


def cli_commands() -> list[tuple[str, Any]]:
    """(``context-broker SUBCOMMAND ...``, its parser) for the command and each subcommand
    (``tools status`` and ``tools list`` are one parser each)."""
    from context_broker.server.cli.commands import _parser

    # The parser writes the variable's value into the help of --config: render it unset.
    saved = os.environ.pop("CONTEXT_BROKER_CONFIG", None)
    try:
        return list(_commands(_parser(), "context-broker"))
    finally:
        if saved is not None:
            os.environ["CONTEXT_BROKER_CONFIG"] = saved


def cli_reference() -> str:
    """Markdown: the help of ``context-broker`` and of each subcommand."""
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "96"
    try:
        out = []
        for command, parser in cli_commands():
            level = "##" if command.count(" ") <= 1 else "###"
            out.append(f"{level} `{command}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
        return "\n".join(out)
    finally:
        if saved is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = saved


GENERATORS = {"config": config_reference, "tools": tool_reference, "cli": cli_reference}


def render(markdown: str) -> str:
    """``markdown`` with each ``<!-- generated: NAME -->`` line replaced by NAME's Markdown."""

    def replace(match: re.Match[str]) -> str:
        generator = GENERATORS.get(match[1])
        if generator is None:
            raise ValueError(
                f"unknown generated part {match[1]!r}; use one of {sorted(GENERATORS)}"
            )
        return generator()

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs event: fill in the generated parts of a page."""
    return render(markdown)
