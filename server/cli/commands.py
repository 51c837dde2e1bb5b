"""The ``context-broker`` command line."""

from __future__ import annotations

import os

# One query is one matrix-vector product: BLAS threads only add contention on a busy host.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import logging
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from context_broker.server.embedding import FastEmbedEmbedder, default_model_dir, resolve_model_dir
from context_broker.server.parts import build_parts
from context_broker.server.settings import AppConfig, load_config

from contextcore.catalog import Catalog
from contextcore.config import ListedTools
from contextcore.errors import ConfigError, ContextCoreError
from contextcore.factory import build_search
from contextcore.loaders import load_catalog_json
from contextcore.services.evaluation import EvalReport, evaluate, load_queries

from ..gateway import GatewayError
from ..terminal import EscapingFormatter, escape_lines
from ..version import broker_version
from .auth import add_parser as add_auth_parser
from .auth import cmd_auth
from .install import (
    CLIENTS,
    SERVERS_FILE,
    ImportResult,
    InstallError,
    broker_command,
    import_servers,
    install,
    parse_env,
)
from .learning import add_parsers as add_learning_parsers
from .learning import cmd_forget, cmd_learn, learn_from_log
from .model_setup import prepare_model_dir

__all__ = ["main"]

log = logging.getLogger(__name__)


CONFIG_ENV = "CONTEXT_BROKER_CONFIG"
_LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]


def _add_config(parser: argparse.ArgumentParser) -> None:
    default = os.environ.get(CONFIG_ENV)
    parser.add_argument(
        "--config",
        type=Path,
        required=not default,
        default=Path(default) if default else None,
        help=f"the broker's TOML config file (default: ${CONFIG_ENV}"
        + (f", now {default!r})" if default else ", which is not set)"),
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="context-broker",
        description="An MCP server that chooses the rules, references and tools for each request.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {broker_version()}")
    log_help = "log level of this run (logs go to stderr); overrides [server] log_level"
    parser.add_argument("--log-level", default=None, choices=_LOG_LEVELS, help=log_help)
    # Also accepted after the subcommand; SUPPRESS keeps a value given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--log-level", default=argparse.SUPPRESS, choices=_LOG_LEVELS, help=log_help
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _serve_parser(sub, common)
    _check_parser(sub, common)
    _repair_parser(sub, common)
    _eval_parser(sub, common)
    _stats_parser(sub, common)
    _tools_parser(sub)
    add_learning_parsers(sub, common, _add_config)
    add_auth_parser(sub, common, _add_config)
    _install_parser(sub)
    setup = sub.add_parser(
        "setup-model", help="prepare the embedding model without a model hub", parents=[common]
    )
    setup.add_argument("--dest", type=Path, default=None, help="target directory")
    return parser


def _serve_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    serve = sub.add_parser("serve", help="run the MCP server", parents=[common])
    _add_config(serve)
    serve.add_argument("--transport", choices=["stdio", "http", "sse"], default="stdio")
    serve.add_argument("--host", default=None, help="HTTP bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="HTTP port (default 8765)")
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="serve HTTP on a non-loopback address WITHOUT AUTHENTICATION (no bearer token): "
        "anyone who can reach it can call every downstream tool",
    )
    serve.add_argument(
        "--tools",
        default=None,
        help="the broker's own tools hosts see listed: model (default: what a model needs), "
        "all, or comma-separated names (overrides [server] tools)",
    )
    serve.add_argument(
        "--profile",
        default=None,
        help="stdio: show the host only what [profiles.NAME] allows (servers, tools, rules, "
        "references, preset)",
    )


def _check_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    check = sub.add_parser(
        "check",
        help="validate a config and report what it loads",
        description="Exit codes: 0 all well, 1 invalid config, 2 a configured downstream "
        "server could not be started or reached, 3 a downstream tool is held back or flagged. "
        "Every problem is in the report; the log (stderr) shows errors only, unless "
        "--log-level asks for more.",
        parents=[common],
    )
    _add_config(check)
    check.add_argument("--json", action="store_true", help="print one JSON object")


def _repair_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    repair = sub.add_parser(
        "repair",
        help="show the session store's damaged records (that reads skip), then remove them "
        "once confirmed (--yes where no one can answer)",
        parents=[common],
    )
    _add_config(repair)
    repair.add_argument("--dry-run", action="store_true", help="only show them")
    repair.add_argument("--yes", action="store_true", help="remove them without asking")


def _eval_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    ev = sub.add_parser("eval", help="measure retrieval quality on a query set", parents=[common])
    source = ev.add_mutually_exclusive_group(required=True)
    source.add_argument("--catalog", type=Path, help="a catalog JSON file")
    source.add_argument("--config", type=Path, help="a broker config (its live catalog)")
    ev.add_argument("--queries", type=Path, required=True, help="JSONL: {query, gold: [keys]}")
    ev.add_argument(
        "--mode",
        choices=["hybrid", "dense", "lexical"],
        default=None,
        help="rank by one plain retriever, for comparison (default: measure exactly what "
        "build_request_context and search_context_items serve, query rows' intents included)",
    )
    ev.add_argument(
        "--rankings", action="store_true", help="with --json: each query's ranked item keys"
    )
    ev.add_argument("--k", default="1,5,10", help="comma-separated cut-offs (default 1,5,10)")
    ev.add_argument("--json", action="store_true", help="print one JSON object")
    ev.add_argument("--model-dir", type=Path, default=None, help="local model directory")
    ev.add_argument(
        "--usage-log", type=Path, default=None, help="learn from this usage log (only) first"
    )
    ev.add_argument(
        "--misses",
        type=int,
        nargs="?",
        const=5,
        default=None,
        metavar="K",
        help="list each query's gold items that are not in its top K (default 5)",
    )
    ev.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    ev.add_argument(
        "--html",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write a self-contained HTML report (metrics, charts, misses) to FILE",
    )


def _stats_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    stats = sub.add_parser(
        "stats",
        help="inclusion and usage analytics from the session store, with suggested include modes",
        parents=[common],
    )
    _add_config(stats)
    stats.add_argument("--session", default=None, help="one session id (default: all)")
    stats.add_argument(
        "--profile", default=None, help="only sessions created under [profiles.NAME]"
    )
    stats.add_argument("--json", action="store_true", help="print one JSON object")


def _tools_parser(sub: Any) -> None:
    tools = sub.add_parser("tools", help="review and approve held-back downstream tools")
    actions = tools.add_subparsers(dest="tools_command", required=True)
    for name in ("status", "list"):
        status = actions.add_parser(name, help="show the tool changes waiting for approval")
        status.add_argument("--json", action="store_true", help="print one JSON object")
    approve = actions.add_parser(
        "approve",
        help="approve a held tool (or all of a server's) by the hash `tools status` showed",
    )
    approve.add_argument("target", metavar="SERVER[/TOOL[@HASH]]")
    approve.add_argument(
        "--hash",
        dest="hashes",
        action="append",
        default=[],
        metavar="HASH",
        help="the sha256 prefix `tools status` showed for the definition you reviewed (one "
        "per tool when approving a whole server); nothing is approved if it no longer matches",
    )
    for action in actions.choices.values():
        where = action.add_mutually_exclusive_group()
        where.add_argument("--config", type=Path, help="the broker config (its [gateway] pin_file)")
        where.add_argument("--pin-file", type=Path, help="the pin file itself")


def _install_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "install",
        help="add the broker to an MCP host's config (merged, with a backup)",
        description="Writes the host's entry for `context-broker serve --config FILE` with "
        "absolute paths, keeping the other servers and a backup of the previous file. With "
        "--import, the host's other servers move behind the broker.",
    )
    parser.add_argument("--client", required=True, choices=CLIENTS, help="the MCP host")
    _add_config(parser)
    parser.add_argument(
        "--scope",
        choices=["local", "project", "user"],
        default=None,
        help="project file (under the current folder), the user's, or local (Claude Code's "
        "default, as `claude mcp add` writes: this folder's servers in ~/.claude.json); "
        "default: user for claude-desktop, cursor, gemini-cli, windsurf and codex, project "
        "for vscode, local for claude-code",
    )
    parser.add_argument(
        "--path",
        type=Path,
        default=None,
        help="the host file to write (required for generic, a standard mcp.json)",
    )
    parser.add_argument("--name", default="context-broker", help="the server's name")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable the host starts the broker with (repeatable)",
    )
    parser.add_argument(
        "--import",
        dest="import_servers",
        action="store_true",
        help=f"also move the host's other servers behind the broker: copied into {SERVERS_FILE} "
        "beside --config (created if missing), which reads it as mcp_servers_file; the host "
        "file then lists only the broker (every changed file is backed up)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the entry (with --import: each file's change), write nothing",
    )
    parser.add_argument(
        "--yes",
        action="store_true",
        help="with --import from a project's file (a cloned repository's, say): move its "
        "servers without asking (their commands are still shown); without it, install asks "
        "in a terminal and refuses elsewhere",
    )


def _cmd_install(args: argparse.Namespace) -> int:
    options: dict[str, Any] = {
        "path": args.path,
        "scope": args.scope,
        "name": args.name,
        "dry_run": args.dry_run,
        "env": parse_env(args.env),
    }
    if args.import_servers:
        plan = import_servers(args.client, args.config, **{**options, "dry_run": True})
        if args.dry_run:  # the files' own tabs kept, every other control character escaped
            print("\t".join(escape_lines(part) for part in plan.diff().split("\t")), end="")
            print(escape_lines(plan.describe()), file=sys.stderr)
            return 0
        if plan.moved and plan.project and not args.yes:
            _agree(plan)
        moved = import_servers(args.client, args.config, **options, approved=plan.entries)
        print(escape_lines(moved.describe()))
        return 0
    result = install(args.client, args.config, **options)
    if args.dry_run:
        print(result.snippet())
        print(result.describe(), file=sys.stderr)
    else:
        print(result.describe())
    return 0


def _agree(plan: ImportResult) -> None:
    """Ask before a project's servers move behind the broker, as the host would have asked
    before starting them: in a terminal, a question; elsewhere, a refusal naming --yes."""
    print(escape_lines(plan.review()), file=sys.stderr)
    if not sys.stdin.isatty():
        raise InstallError(
            "a project's servers start only once you agree: review the commands above, then "
            "run install --import again with --yes; nothing was written"
        )
    answer = input("move them behind the broker, which will start them? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise InstallError("not moved; nothing was written")


def _cmd_tools(args: argparse.Namespace) -> int:
    from ..gateway.trust.approvals import approve_tools, pin_file_of, tools_status

    path = pin_file_of(args.config, args.pin_file)
    # The commands printed repeat the option given, so they can be run as they are.
    given = ("--pin-file", path) if args.pin_file is not None else ("--config", args.config)
    where = f"{given[0]} {shlex.quote(str(given[1]))}"
    program = shlex.join(broker_command())  # as a shell runs it without the venv on PATH
    if args.tools_command == "approve":
        shown = approve_tools(path, args.target, args.hashes, where=where, program=program)
    else:
        shown = tools_status(path, as_json=args.json, where=where, program=program)
    print(escape_lines(shown))
    return 0


def _parse_ks(raw: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in raw.split(",") if part.strip()})
    except ValueError as exc:
        raise ContextCoreError(f"--k must be comma-separated integers, got {raw!r}") from exc
    if not ks or ks[0] < 1:
        raise ContextCoreError(f"--k values must be >= 1, got {raw!r}")
    return ks


def _format_report(report: EvalReport, ks: Sequence[int]) -> str:
    m = report.metrics
    lines = [f"mode {report.mode}: {report.n_queries} queries over {report.n_items} items"]
    for k in ks:
        lines.append(
            f"  @{k:<3} recall {m[f'recall@{k}']:.4f}  ndcg {m[f'ndcg@{k}']:.4f}  "
            f"comp {m[f'comp@{k}']:.4f}"
        )
    lines.append(f"  mrr  {m['mrr']:.4f}")
    for key in report.missing_gold:
        lines.append(f"  warning: gold key {key} is not in the catalog")
    lines += [f"  warning: {w}" for w in report.warnings]
    if report.misses is not None:
        lines.append(
            f"misses at {report.misses_at}: {len(report.misses)} of {report.n_queries} queries"
        )
        for miss in report.misses:
            lines.append(f"  {miss.query!r}")
            for key, rank in miss.missing.items():
                lines.append(f"    missed {key} ({f'rank {rank}' if rank else 'not ranked'})")
            lines.append(f"    top: {', '.join(miss.top) or '(nothing)'}")
    return "\n".join(lines)


def _eval_progress(line: str) -> None:
    print(f"eval: {line}", file=sys.stderr, flush=True)


def _cmd_eval(args: argparse.Namespace) -> int:
    ks = _parse_ks(args.k)
    if args.catalog is not None:
        config = AppConfig(base_dir=Path.cwd())
        catalog = Catalog(load_catalog_json(args.catalog))
        model_dir = args.model_dir or resolve_model_dir(config)
        embedder = FastEmbedEmbedder(config.search.model, model_dir=model_dir)
        engine = build_search(config, catalog, embedder)
    else:
        from .live import gather_downstream

        if not args.quiet:
            _eval_progress("loading the config and starting its downstream servers")
        parts = build_parts(load_config(args.config))
        for status in gather_downstream(parts):
            if not status["connected"]:
                log.warning("server %s is not connected: %s", status["name"], status["lastError"])
        engine = parts.search
    if args.usage_log is not None:
        learned = learn_from_log(engine, args.usage_log)
        if not args.quiet:
            _eval_progress(f"learned from {learned} logged request(s) of {args.usage_log}")
    from ..ui.eval_report import REPORT_DEPTH

    report = evaluate(
        engine,
        load_queries(args.queries),
        ks=ks,
        mode=args.mode or "served",
        misses_at=args.misses,
        rank_depth=REPORT_DEPTH if args.html is not None else 0,
        progress=None if args.quiet else _eval_progress,
    )
    if args.json:
        print(json.dumps(report.to_dict(rankings=args.rankings)))
    else:
        print(escape_lines(_format_report(report, ks)))
    if args.html is not None:
        _write_eval_html(args, report, ks)
    return 0


def _write_eval_html(args: argparse.Namespace, report: EvalReport, ks: Sequence[int]) -> None:
    from ..ui.eval_report import eval_report_html

    title = f"Retrieval evaluation: {args.queries.name}"
    page = eval_report_html(report, ks, misses_k=args.misses or max(ks), title=title)
    try:
        args.html.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise ContextCoreError(
            f"cannot write the HTML report to {str(args.html)!r}: {exc.strerror}; "
            "choose a writable --html path"
        ) from exc
    if not args.quiet:
        _eval_progress(f"wrote the HTML report to {args.html}")


def _cmd_setup_model(args: argparse.Namespace) -> int:
    dest = args.dest or default_model_dir("sentence-transformers/all-MiniLM-L6-v2")
    changed = prepare_model_dir(dest)
    state = "prepared" if changed else "already prepared"
    print(f"embedding model {state} in {dest}")
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from .check import check_exit_code, check_report, format_check

    def announce(line: str) -> None:  # before the server starts: a person sees what runs
        print(f"check: {escape_lines(line)}", file=sys.stderr, flush=True)

    report = check_report(args.config, announce)
    print(json.dumps(report, indent=2) if args.json else format_check(report))
    return check_exit_code(report)


def _cmd_repair(args: argparse.Namespace) -> int:
    from .repair import repair

    return repair(args.config, dry_run=args.dry_run, yes=args.yes)


def _cmd_stats(args: argparse.Namespace) -> int:
    from context_broker.tools.analytics import usage_payload

    from ..stores import build_store

    config = load_config(args.config)
    if config.persistence.backend == "memory":
        print(
            "context-broker: sessions are kept in memory only ([persistence] backend = "
            '"memory"), so there is nothing stored to analyse; use backend = "sqlite"',
            file=sys.stderr,
        )
        return 2
    parts = build_parts(config, store=build_store(config), use_config_embedder=False)
    usage = usage_payload(parts.broker, args.session, args.profile)
    if args.json:
        print(json.dumps(usage.model_dump(mode="json", exclude={"report"})))
    else:
        print(escape_lines(usage.report))
    return 0


def _listed_tools(value: str | None) -> ListedTools | None:
    """``serve --tools``: ``model``, ``all`` or comma-separated tool names."""
    if value is None or value in ("model", "all"):
        return value  # type: ignore[return-value]
    return tuple(n.strip() for n in value.split(",") if n.strip())


_WAITING = (
    "context-broker: serving MCP over stdin and stdout, waiting for a host to speak: a host "
    "starts this command itself (`context-broker install --client ...` adds it to one), and "
    "MCP Inspector shows what it answers (see the Hosts page); Ctrl-D or Ctrl-C ends it"
)


def _cmd_serve(args: argparse.Namespace) -> int:
    from ..app import serve

    if args.transport == "stdio" and sys.stdin.isatty():  # a person, not a host, started it
        print(_WAITING, file=sys.stderr, flush=True)
    try:
        return serve(
            args.config,
            transport=args.transport,
            host=args.host,
            port=args.port,
            log_level_given=args.log_level is not None,
            insecure=args.insecure,
            profile=args.profile,
            tools=_listed_tools(args.tools),
        )
    except ConfigError as exc:  # found at startup: exit 1, as check does for the same config
        print(f"context-broker: error: {escape_lines(str(exc))}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``context-broker`` console script."""
    args = _parser().parse_args(argv)
    # check reports every problem itself; the log would say each of them again.
    level = args.log_level or ("ERROR" if args.command == "check" else "INFO")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(EscapingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    commands = {
        "eval": _cmd_eval,
        "setup-model": _cmd_setup_model,
        "check": _cmd_check,
        "repair": _cmd_repair,
        "stats": _cmd_stats,
        "serve": _cmd_serve,
        "tools": _cmd_tools,
        "learn": cmd_learn,
        "forget": cmd_forget,
        "install": _cmd_install,
        "auth": cmd_auth,
    }
    try:
        return commands[args.command](args)
    except _KNOWN as exc:
        return _said(exc)
    except BaseExceptionGroup as group:  # raised in a task group: said as plainly
        leaves = _leaves(group)
        if leaves and all(isinstance(e, _KNOWN) for e in leaves):
            return _said(*leaves)
        if leaves and all(isinstance(e, KeyboardInterrupt) for e in leaves):
            return 130
        raise
    except KeyboardInterrupt:
        return 130


_KNOWN = (ContextCoreError, GatewayError, InstallError)


def _said(*errors: BaseException) -> int:
    """Each error as one line on stderr (the same one once); the exit status 2."""
    for message in dict.fromkeys(str(e) for e in errors):
        print(f"context-broker: error: {escape_lines(message)}", file=sys.stderr)
    return 2


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """The exceptions a (nested) exception group holds."""
    out: list[BaseException] = []
    for exc in group.exceptions:
        out += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
