"""The domain's configuration and the one config loader: TOML into frozen pydantic models,
loaded once. The server's settings (``server.settings.AppConfig``) extend ``BrokerConfig``
with the transport tables and are loaded by the same code.

Unknown keys are rejected with their dotted name; relative paths resolve against the config
file's folder; ``CONTEXT_BROKER_<SECTION>__<KEY>`` environment variables override single keys
(for example ``CONTEXT_BROKER_SEARCH__TOP_N=8``).
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .assembly_model import AssemblyModelSpec
from .errors import ConfigError
from .items import IncludeMode
from .presets import PresetName

__all__ = [
    "AgentConfig",
    "BrokerConfig",
    "ConfigModel",
    "HistoryConfig",
    "InlineItem",
    "LearningConfig",
    "LimitsConfig",
    "ListedTools",
    "PersistenceConfig",
    "ProfileConfig",
    "SearchConfig",
    "SourcesConfig",
    "SummarizerConfig",
    "load_config",
    "parse_config",
]

ENV_PREFIX = "CONTEXT_BROKER_"


class ConfigModel(BaseModel):
    """A config table: frozen, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentConfig(ConfigModel):
    """Who the catalog is for."""

    name: str = "default"
    description: str = ""


class SearchConfig(ConfigModel):
    """Embedding model and ranking defaults."""

    model: str = "sentence-transformers/all-MiniLM-L6-v2"
    model_dir: Path | None = None
    cache_dir: Path | None = None
    embedding_cache: Path | None = None
    semantic: bool = True
    mode: Literal["hybrid", "dense", "lexical"] = "hybrid"
    top_k: int = Field(20, ge=1)
    top_n: int = Field(5, ge=1)
    include_score: float = Field(0.7, ge=0.0, le=1.0)
    preset: PresetName = "normal"
    min_score: float = Field(0.25, ge=0.0, le=1.0)
    min_score_tools: float = Field(0.22, ge=0.0, le=1.0)
    max_context_tokens: int = Field(4000, ge=100)
    lexical_weight: float = Field(0.15, ge=0.0)
    max_query_chars: int = Field(100_000, ge=1)
    part_share: float = Field(0.5, ge=0.0, le=1.0)
    feedback: float = Field(0.5, ge=0.0, le=1.0)
    conversation_weight: float = Field(1.0, ge=0.0, le=1.0)
    conversation_turns: int = Field(2, ge=0, le=8)
    query_adapter: bool = True
    small_talk: bool = True
    threads: int | None = Field(None, ge=1)
    # Further tools a request context names one line each (contextcore/reach.py).
    reach_tokens: int = Field(1200, ge=0)
    reach_per_server: int = Field(8, ge=0)
    reach_ranked: int = Field(20, ge=0)
    reach_per_step: int = Field(2, ge=0)
    reach_min_score: float = Field(0.15, ge=0.0, le=1.0)
    reach_min_best: float = Field(0.30, ge=0.0, le=1.0)
    reach_directory_tokens: int = Field(400, ge=0)
    reach_line_chars: int = Field(90, ge=20)


class SourcesConfig(ConfigModel):
    """Files and folders that rules and references are read from."""

    rule_dirs: tuple[Path, ...] = ()
    reference_dirs: tuple[Path, ...] = ()
    rule_files: tuple[Path, ...] = ()
    reference_files: tuple[Path, ...] = ()
    catalog_files: tuple[Path, ...] = ()
    default_include: IncludeMode = "agent"


class InlineItem(ConfigModel):
    """A rule or reference written directly in the config."""

    name: str = Field(min_length=1)
    text: str = ""
    description: str = ""
    include: IncludeMode = "agent"
    priority: int = 0
    enabled: bool = True


class PersistenceConfig(ConfigModel):
    """Where sessions live."""

    backend: Literal["memory", "sqlite", "postgres", "redis"] = "memory"
    path: Path | None = None
    url: str | None = None
    """postgres/redis: where the shared store is; ``${env:NAME}`` is expanded when the store
    opens, and the URL is never shown in errors or logs (it may hold a password)."""


class SummarizerConfig(ConfigModel):
    """An LLM API used for running summaries (tried before MCP sampling and the extractive
    summarizer). ``api_key_env`` names the environment variable holding the key."""

    provider: Literal["none", "anthropic", "openai"] = "none"
    model: str = ""
    base_url: str | None = None
    api_key_env: str | None = None
    timeout: float = Field(20.0, gt=0)
    max_tokens: int = Field(500, ge=16)
    use_sampling: bool = True


class HistoryConfig(ConfigModel):
    """Conversation history defaults."""

    max_tokens: int = Field(24_000, ge=1)
    preset: str = "general"
    summarize_after: int = Field(10, ge=1)
    summary_threshold: int = Field(10, ge=1)
    keep_recent: int = Field(6, ge=1)
    window_without_summary: int = Field(20, ge=1)
    summary_max_tokens: int = Field(500, ge=16)
    auto_summarize: bool = True
    summarizer: SummarizerConfig = SummarizerConfig()


class LearningConfig(ConfigModel):
    """Learning from usage: how strongly the requests that led to an item's use shape its
    ranking (``weight`` at full evidence), from how many requests on (``min_evidence``), for
    how long (``decay``: half-life in days, 0 = never), how many recent requests per item
    are kept for the nearest-request vote, from how many requests on an item is scored
    wherever the cold ranking put it (``reach_evidence``), and how much a selected item lifts
    the items used together with it (``companion_weight``, 0 = not at all)."""

    enabled: bool = True
    weight: float = Field(4.0, ge=0.0)
    min_evidence: int = Field(1, ge=1)
    decay: float = Field(0.0, ge=0.0)
    max_requests_per_item: int = Field(32, ge=1, le=10_000)
    reach_evidence: int = Field(3, ge=1)
    companion_weight: float = Field(0.25, ge=0.0)


class LimitsConfig(ConfigModel):
    """How much one tool call may store, and how big one tool result may be.

    Writes over a limit are refused before anything is stored, with the key named; results
    over ``max_result_bytes`` are cut with a note saying what was cut and how to get the rest.
    """

    max_history_message_chars: int = Field(200_000, ge=100)
    max_append_chars: int = Field(1_000_000, ge=100)
    max_snapshot_field_chars: int = Field(50_000, ge=100)
    max_summary_chars: int = Field(20_000, ge=100)
    max_label_chars: int = Field(1_000, ge=10)
    max_result_bytes: int = Field(512 * 1024, ge=16 * 1024)


ListedTools = Literal["model", "all"] | tuple[str, ...]
"""Which of the broker's own tools a host's ``tools/list`` shows: ``"model"`` (what a model
needs to work), ``"all"``, or the names of the tools to list."""


class ProfileConfig(ConfigModel):
    """One ``[profiles.NAME]`` table: what a host that selects it sees. A list left out
    means all of that kind; ``tools`` narrows the servers' tools further (``server/tool`` or
    ``server__tool``, the tool as the downstream names it). ``token_env`` names the
    environment variables holding bearer tokens that select the profile over HTTP (and
    authenticate)."""

    servers: tuple[str, ...] | None = None
    tools: tuple[str, ...] | None = None
    rules: tuple[str, ...] | None = None
    references: tuple[str, ...] | None = None
    preset: PresetName | None = None
    token_env: tuple[str, ...] = ()
    broker_tools: ListedTools | None = None
    """The broker's own tools its hosts see listed (default: ``[server] tools``)."""

    @field_validator("token_env", mode="before")
    @classmethod
    def _one_or_more(cls, value: object) -> object:
        return (value,) if isinstance(value, str) else value


_PROFILE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class BrokerConfig(ConfigModel):
    """The domain's configuration (every section has defaults); the server's settings
    (``server.settings.AppConfig``) add the transport tables to it."""

    agent: AgentConfig = AgentConfig()
    search: SearchConfig = SearchConfig()
    sources: SourcesConfig = SourcesConfig()
    rules: tuple[InlineItem, ...] = ()
    references: tuple[InlineItem, ...] = ()
    persistence: PersistenceConfig = PersistenceConfig()
    history: HistoryConfig = HistoryConfig()
    limits: LimitsConfig = LimitsConfig()
    learning: LearningConfig = LearningConfig()
    models: dict[str, AssemblyModelSpec] = Field(default_factory=dict)
    profiles: dict[str, ProfileConfig] = Field(default_factory=dict)
    base_dir: Path = Path(".")

    @field_validator("profiles")
    @classmethod
    def _profile_names(cls, value: dict[str, ProfileConfig]) -> dict[str, ProfileConfig]:
        # A profile's name is a URL path segment (/mcp/NAME).
        bad = [n for n in value if not _PROFILE_NAME.match(n)]
        if bad:
            raise ValueError(
                f"profile names must be 1-64 letters, digits, '_' or '-'; got {bad[0]!r}"
            )
        return value

    def resolve(self, path: Path) -> Path:
        """``path`` relative to the config file's folder (``~`` expanded; absolute paths
        unchanged)."""
        path = path.expanduser()
        return path if path.is_absolute() else (self.base_dir / path).resolve()


_SECRET_KEY = re.compile(r"(^|_)(token|api_?key|secret|password|passwd|credentials?)$", re.I)
_SECRET_TABLES = frozenset({"env", "headers"})
# The keys of a [servers.NAME] table whose values may hold a credential (a token in args, a
# password in a URL); the others (include, timeout, trust, ...) are shown.
_SERVER_SECRETS = frozenset({"command", "args", "url", "env", "headers", "oauth", "cwd"})
_QUOTED = re.compile(r"'([^']*)'")
_URL_PASSWORD = re.compile(r"(://[^/@:]*:)[^/@]*@")


def _schema_tables(
    model: type[BaseModel], table: str = "", above: frozenset[type] = frozenset()
) -> Iterator[tuple[str, str]]:
    """(key, table) for every key of the config schema; table "" is the top level, ``[[x]]``
    an array of tables; recursive models are walked once."""
    if model in above:
        return
    above |= {model}
    for key, info in model.model_fields.items():
        if key == "base_dir":
            continue
        yield key, table
        annotation = info.annotation
        args = get_args(annotation)
        origin = get_origin(annotation)
        name = f"{table}.{key}" if table else key
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _schema_tables(annotation, name, above)
        elif origin is dict and isinstance(args[1], type) and issubclass(args[1], BaseModel):
            yield from _schema_tables(args[1], f"{name}.NAME", above)
        elif origin is tuple and isinstance(args[0], type) and issubclass(args[0], BaseModel):
            yield from _schema_tables(args[0], f"[{name}]", above)


def _hint(loc: tuple[Any, ...], schema: type[BaseModel]) -> str:
    """Where an unknown key really belongs, when the schema has it elsewhere."""
    key = str(loc[-1])
    here = ""
    for i, part in enumerate(loc[:-1]):
        if isinstance(part, int):
            here = f"[{here}]"
        else:
            named = i % 2 == 1 and loc[0] in ("servers", "models", "profiles")
            here = f"{here}.{'NAME' if named else part}" if here else str(part)
    known = list(_schema_tables(schema))
    tables = [t for k, t in known if k == key and t != here]
    if not tables:
        return _near(key, here, known)
    places = [
        f"[{t}] {key}" if t else f"{key} at the top level (before any [table])" for t in tables[:3]
    ]
    return f"; did you mean {' or '.join(places)}?"


def _near(key: str, here: str, known: list[tuple[str, str]]) -> str:
    """A suggestion for a key the schema has nowhere: ``[server.time]`` is a server under
    ``[servers.time]``; a misspelt key or table is the known one it is closest to."""
    if here and any(t == f"{here}s.NAME" for _, t in known):
        return f"; did you mean [{here}s.{key}]?"
    siblings = sorted({k for k, t in known if t == here})
    close = difflib.get_close_matches(key, siblings, n=1, cutoff=0.75)
    if not close:
        return ""
    tables = {t for _, t in known}
    name = f"{here}.{close[0]}" if here else close[0]
    return f"; did you mean [{name}]?" if name in tables else f"; did you mean {close[0]!r}?"


def _secret(loc: tuple[Any, ...]) -> bool:
    parts = [str(p) for p in loc]
    if parts[:2] == ["persistence", "url"]:
        return True
    if parts[:1] == ["servers"] and (len(parts) < 3 or parts[2] in _SERVER_SECRETS):
        return True
    return bool(_SECRET_TABLES.intersection(parts)) or any(_SECRET_KEY.search(p) for p in parts)


def _closest_choice(error: Mapping[str, Any]) -> str:
    """``; did you mean 'always'?`` for a misspelt choice of a fixed set, else ""."""
    value = error.get("input")
    expected = (error.get("ctx") or {}).get("expected")
    if error["type"] != "literal_error" or not isinstance(value, str) or not expected:
        return ""
    close = difflib.get_close_matches(value, _QUOTED.findall(str(expected)), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _describe(error: Mapping[str, Any], schema: type[BaseModel]) -> str:
    loc = tuple(error["loc"])
    where = ".".join(str(p) for p in loc) or "(top level)"
    if error["type"] == "extra_forbidden":
        return f"unknown key {where!r}" + (_hint(loc, schema) if loc else "")
    if _secret(loc):
        return f"{where}: {error['msg']} (value not shown: it may be a secret)"
    shown = _URL_PASSWORD.sub(r"\1***@", repr(error.get("input")))
    return f"{where}: {error['msg']} (got {shown}){_closest_choice(error)}"


def _apply_env(data: dict[str, Any], environ: Mapping[str, str]) -> None:
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        path = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
        try:
            value: Any = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        node = data
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"environment variable {name} overrides a non-table key")
            node = child
        node[path[-1]] = value


Config = TypeVar("Config", bound=BrokerConfig)


def parse_config(
    data: Mapping[str, Any],
    *,
    base_dir: Path,
    source: str = "config",
    environ: Mapping[str, str] | None = None,
    schema: type[Config] = BrokerConfig,  # type: ignore[assignment]
) -> Config:
    """Validate a config mapping against ``schema``; raise ``ConfigError`` naming every bad
    key."""
    raw = dict(data)
    _apply_env(raw, os.environ if environ is None else environ)
    if "base_dir" in raw:
        raise ConfigError(f"{source}: unknown key 'base_dir'", field="base_dir")
    try:
        return schema.model_validate({**raw, "base_dir": base_dir.resolve()})
    except ValidationError as exc:
        problems = "; ".join(_describe(e, schema) for e in exc.errors())
        # Not chained: the validation error's text quotes every value, secrets included.
        raise ConfigError(f"{source}: {problems}") from None


def load_config(
    path: Path,
    *,
    environ: Mapping[str, str] | None = None,
    schema: type[Config] = BrokerConfig,  # type: ignore[assignment]
) -> Config:
    """Read and validate a TOML config file against ``schema``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {str(path)!r}: {exc.strerror}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return parse_config(
        data, base_dir=path.parent, source=str(path), environ=environ, schema=schema
    )
