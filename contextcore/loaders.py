"""Reading items from files: Markdown with front matter, Cursor ``.mdc`` rules, whole
``AGENTS.md``/``CLAUDE.md`` files, and catalog JSON files."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from .errors import CatalogError
from .items import IncludeMode, Reference, Rule, Tool, parse_include

__all__ = [
    "WHOLE_FILE_NAMES",
    "load_catalog_json",
    "load_markdown_dir",
    "load_markdown_file",
    "split_front_matter",
]

WHOLE_FILE_NAMES = frozenset({"AGENTS.md", "CLAUDE.md"})
TextKind = Literal["rule", "reference"]


def split_front_matter(text: str, *, source: str) -> tuple[dict[str, Any], str]:
    """Split ``---``-delimited YAML front matter from a Markdown body."""
    if not text.startswith("---"):
        return {}, text
    lines = text.splitlines(keepends=True)
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            raw = "".join(lines[1:end])
            try:
                meta = yaml.safe_load(raw) or {}
            except yaml.YAMLError as exc:
                raise CatalogError(f"{source}: front matter is not valid YAML: {exc}") from exc
            if not isinstance(meta, dict):
                raise CatalogError(f"{source}: front matter must be a mapping of keys to values")
            return meta, "".join(lines[end + 1 :])
    raise CatalogError(f"{source}: front matter opened with '---' is never closed")


def _cursor_include(meta: Mapping[str, Any]) -> IncludeMode:
    """Cursor's rule types: alwaysApply → always; a description alone → agent; else manual."""
    if meta.get("alwaysApply") is True:
        return "always"
    if str(meta.get("description") or "").strip():
        return "agent"
    return "manual"


def load_markdown_file(
    path: Path, kind: TextKind, *, default_include: IncludeMode = "agent"
) -> Rule | Reference:
    """One item from a Markdown file (``.md`` with front matter, ``.mdc`` Cursor rule, or a
    whole ``AGENTS.md``/``CLAUDE.md``)."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"cannot read {source!r}: {exc.strerror}") from exc
    if path.name in WHOLE_FILE_NAMES:
        meta: dict[str, Any] = {}
        body = text
        name = path.stem
    else:
        meta, body = split_front_matter(text, source=source)
        name = str(meta.get("name") or path.stem)
    if path.suffix == ".mdc":
        include = _cursor_include(meta)
    else:
        include = parse_include(meta.get("include", default_include), field=f"{source}: include")
    priority = meta.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise CatalogError(f"{source}: priority must be an integer, got {priority!r}")
    cls = Rule if kind == "rule" else Reference
    return cls(
        name=name,
        text=body.strip(),
        description=str(meta.get("description") or "").strip(),
        include=include,
        priority=priority,
        enabled=bool(meta.get("enabled", True)),
        source=source,
    )


def load_markdown_dir(
    folder: Path, kind: TextKind, *, default_include: IncludeMode = "agent"
) -> list[Rule | Reference]:
    """Every ``.md`` and ``.mdc`` file under ``folder``, in path order."""
    if not folder.is_dir():
        raise CatalogError(f"{kind} folder {str(folder)!r} does not exist or is not a folder")
    files = sorted(p for p in folder.rglob("*") if p.suffix in (".md", ".mdc") and p.is_file())
    return [load_markdown_file(p, kind, default_include=default_include) for p in files]


def load_catalog_json(path: Path) -> list[Rule | Reference | Tool]:
    """Items from a catalog file: ``{"servers": {S: {"tools": [...]}}, "rules": [...],
    "references": [...]}``. Tool names are kept as they are, even outside the MCP pattern."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CatalogError(f"cannot read catalog {str(path)!r}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise CatalogError(f"catalog {str(path)!r} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogError(f"catalog {str(path)!r} must be a JSON object")
    items: list[Rule | Reference | Tool] = []
    for server, spec in (data.get("servers") or {}).items():
        server_include = spec.get("include")
        for i, tool in enumerate(spec.get("tools") or []):
            where = f"servers.{server}.tools[{i}]"
            if not isinstance(tool, dict) or not tool.get("name"):
                raise CatalogError(f"{path}: {where} needs a name", field=where)
            items.append(
                Tool(
                    server=str(server),
                    name=str(tool["name"]),
                    description=str(tool.get("description") or ""),
                    input_schema=tool.get("inputSchema") or {},
                    include=parse_include(tool["include"]) if "include" in tool else None,
                    server_include=parse_include(server_include) if server_include else None,
                )
            )
    for key, cls in (("rules", Rule), ("references", Reference)):
        for i, row in enumerate(data.get(key) or []):
            if not isinstance(row, dict) or not row.get("name"):
                raise CatalogError(f"{path}: {key}[{i}] needs a name", field=f"{key}[{i}]")
            items.append(
                cls(
                    name=str(row["name"]),
                    text=str(row.get("text") or ""),
                    description=str(row.get("description") or ""),
                    include=parse_include(row.get("include", "agent")),
                    priority=int(row.get("priority", 0)),
                    enabled=bool(row.get("enabled", True)),
                )
            )
    return items
