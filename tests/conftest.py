"""Settings every test shares: the Hypothesis profile, and the marks of the long suites.

Property tests stay random where developers run them (each run tries new cases), and run
derandomized under CI (``HYPOTHESIS_PROFILE=ci``, which ``.ci/run`` sets): the same cases on
every run and no example database, so whether a change lands never depends on luck.

The suites that take long carry a mark, so the fast loop of CONTRIBUTING can leave them out
(``-m "not slow and not conformance and not browser"``): ``conformance`` on every test under
``tests/conformance/`` (the MCP conformance suite in Node), ``browser`` on every test that uses
the ``browser`` fixture (Chromium), and ``slow`` on the modules and tests of ``SLOW`` below,
each with the reason it cannot be quick. The modules with such tests run first, so that under
pytest-xdist no worker starts a long test when the others are nearly done.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

TESTS = Path(__file__).resolve().parent
CONFORMANCE_DIR = TESTS / "conformance"
LONG_MARKS = ("slow", "conformance", "browser")

# Why each costs seconds a test: what it starts is the behaviour under test.
_CLI = "runs the context-broker command as a subprocess in each test (a Python start each)"
_SERVE = "runs context-broker serve, with real downstream servers, in each test"
_MODEL = "the real embedding model over a benchmark catalog"
_REPLICAS = "several brokers on one real PostgreSQL or Redis store"
_TRUST = "a broker restarted against a changing downstream, with the tools commands between"

SLOW: dict[str, str] = {
    "broker_gateway/test_broker_pass_through.py": _SERVE,
    "broker_gateway/test_broker_with_downstreams.py": _SERVE,
    "cli/test_eval_command.py": "context-broker eval with the real model, as a person runs it",
    "cli/test_eval_served.py": "context-broker eval and a served broker, both with the real model",
    "cli/test_first_hour.py": _CLI,
    "cli/test_install.py": _CLI,
    "cli/test_install_beside.py": "builds the broker's wheel and installs it in a fresh venv",
    "cli/test_install_codex.py": _CLI,
    "cli/test_install_import.py": _CLI,
    "cli/test_install_jsonc.py": _CLI,
    "cli/test_install_consent.py": _CLI,
    "cli/test_install_scopes.py": _CLI,
    "cli/test_check_output.py": _CLI,
    "cli/test_cli_manners.py": _CLI,
    "cli/test_viewer_for_stdio.py": _SERVE + ", and the viewer of a second broker",
    "code_mode/test_code_runs.py": _SERVE + ", with programs in the sandbox",
    "code_mode/test_code_refusals.py": _SERVE + ", with hostile programs in the sandbox",
    "core/test_model_quality.py": _MODEL,
    "core/test_ranking_levers.py": _MODEL + ", each lever on and off",
    "core/test_small_talk.py": _MODEL,
    "docs/test_commands.py::test_the_commands_that_change_nothing_run_and_succeed": _CLI,
    "gateway/test_downstream_surface.py": _SERVE,
    "gateway/test_broken_server_seen.py": _SERVE,
    "gateway/test_conversation_cost.py": _SERVE + ", with the real model",
    "gateway/test_gateway_downstream.py": "the five reference servers as real subprocesses",
    "gateway/test_imported_servers.py": _SERVE,
    "gateway/test_model_reach.py": _SERVE + ", with the real model",
    "gateway/test_modern_host_questions.py": _SERVE,
    "gateway/test_oauth_downstream.py": _SERVE + ", and the auth command",
    "gateway/test_oauth_shared_store.py": _REPLICAS,
    "gateway/test_prefix_names.py": _SERVE,
    "gateway/test_servers_reload.py": _SERVE + ", reloaded",
    "gateway/test_transparent_calls.py": _SERVE,
    "hardening/test_cli_usability.py": _CLI,
    "hardening/test_forged_context_text.py": _SERVE,
    "hardening/test_host_isolation.py": _SERVE + ", with two hosts",
    "hardening/test_downstream_surface_bounds.py": _SERVE,
    "hardening/test_http_access.py": _SERVE,
    "hardening/test_poisoned_downstream.py": _TRUST,
    "hardening/test_round_three_credentials.py": _SERVE + ", and the auth command",
    "hardening/test_round_three_limits.py": _SERVE,
    "hardening/test_round_three_profiles.py": _SERVE,
    "hardening/test_round_three_relay.py": _SERVE,
    "hardening/test_setup_safety.py": _SERVE + ", and processes that must be stopped",
    "hardening/test_startup_reliability.py": _SERVE + ", in its first seconds",
    "hardening/test_terminal_output.py": _CLI,
    "hardening/test_trust_whole_tool.py": _TRUST,
    "learning/test_learning_cli.py": _CLI + ", with the real model",
    "learning/test_learning_mcp.py": _SERVE,
    "learning/test_learning_reach_mcp.py": _SERVE + ", with the real model",
    "learning/test_usage_suggestions.py": _SERVE,
    "model_view/test_follow_ups.py": _SERVE + ", with the real model",
    "model_view/test_scripted_host.py": _SERVE + ", with the real model",
    "profiles/test_profiles_served.py": _SERVE,
    "server/test_fast_path_contract.py": _SERVE,
    "server/test_node_peers.py": "the MCP Inspector CLI (Node) against a served broker",
    "server/test_transports.py": _SERVE,
    "server/test_usage_stats.py": _SERVE,
    "store/test_damaged_records.py": _CLI + ", on each backend",
    "store/test_replicas.py": _REPLICAS,
    "test_repeat_script.py": "runs the test command itself, on one test, five times",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if CONFORMANCE_DIR in item.path.parents:
            item.add_marker(pytest.mark.conformance)
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
        where = item.path.relative_to(TESTS).as_posix()
        why = SLOW.get(where) or SLOW.get(f"{where}::{item.name.split('[')[0]}")
        if why:
            item.add_marker(pytest.mark.slow(why))
    # Whole modules move (a stable sort), so module-scoped fixtures still start once.
    long_modules = {item.path for item in items if _is_long(item)}
    items.sort(key=lambda item: item.path not in long_modules)


def _is_long(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) for name in LONG_MARKS)
