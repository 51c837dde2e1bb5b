from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from context_broker.server.gateway import Redactor, SecretError, expand_server
from context_broker.server.settings import DownstreamConfig
from gateway_env import everything_server, running, status_of, stdio, tool_error

from tests.support.polling import eventually

SECRET = "s3cr3t-Value-0042"


def test_env_references_expand_in_env_headers_args_and_url() -> None:
    environ = {"TOKEN": SECRET, "HOST": "127.0.0.1"}
    stdio_cfg = DownstreamConfig(
        command="srv", args=("--key=${env:TOKEN}",), env={"API_KEY": "${env:TOKEN}", "MODE": "x"}
    )
    expanded, secrets = expand_server("a", stdio_cfg, environ)
    assert expanded.args == (f"--key={SECRET}",)
    assert expanded.env == {"API_KEY": SECRET, "MODE": "x"}
    assert secrets == {SECRET}
    http_cfg = DownstreamConfig(
        url="http://${env:HOST}:9/mcp", headers={"Authorization": "Bearer ${env:TOKEN}"}
    )
    expanded, secrets = expand_server("b", http_cfg, environ)
    assert expanded.url == "http://127.0.0.1:9/mcp"
    assert expanded.headers == {"Authorization": f"Bearer {SECRET}"}
    assert SECRET in secrets and f"Bearer {SECRET}" in secrets


def test_literal_credential_headers_are_secrets_too() -> None:
    cfg = DownstreamConfig(url="http://h/mcp", headers={"X-Api-Key": "literal-key-123"})
    assert expand_server("c", cfg, {})[1] == {"literal-key-123"}


def test_an_unset_variable_is_named_without_any_value() -> None:
    cfg = DownstreamConfig(command="srv", env={"TOKEN": "${env:NOT_SET_ANYWHERE}"})
    with pytest.raises(SecretError, match="NOT_SET_ANYWHERE") as info:
        expand_server("a", cfg, {})
    assert "servers.a.env.TOKEN" in str(info.value)


def test_redactor_masks_text_json_and_models_and_log_records() -> None:
    redactor = Redactor([SECRET, "ab"])  # too short to mask
    assert redactor.redact(f"x {SECRET} y ab") == "x *** y ab"
    assert redactor.redact_json({"k": [f"{SECRET}!"]}) == {"k": ["***!"]}
    record = logging.LogRecord("n", logging.INFO, "p", 1, "got %s", (SECRET,), None)
    redactor.filter().filter(record)
    assert record.getMessage() == "got ***"


async def test_a_secret_never_appears_in_results_errors_status_or_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    environ = {"GW_SECRET": SECRET, "PATH": "/usr/bin:/bin"}
    servers = {
        "everything": everything_server(env={"API_TOKEN": "${env:GW_SECRET}"}),
        "broken": stdio(str(tmp_path / "missing-${env:GW_SECRET}")),
    }
    async with running(servers, environ=environ) as gw:
        result = await gw.call_tool("everything", "get-env", {})
        text = json.dumps(result.model_dump(by_alias=True, mode="json"))
        assert "API_TOKEN" in text and "***" in text
        lane = json.dumps(await gw.call_tool("everything", "get-env", {}, plain=True))
        assert "API_TOKEN" in lane and "***" in lane
        broken = status_of(gw, "broken")
        assert broken.state != "connected" and broken.last_error
        failed = tool_error(await gw.call_tool("broken", "anything", {}))
        assert "broken" in failed
        await eventually(lambda: status_of(gw, "broken").reconnects >= 1, within=10)
        statuses = json.dumps([s.row().model_dump(by_alias=True) for s in gw.status()])
    for shown in (text, lane, statuses, failed, broken.last_error, caplog.text):
        assert SECRET not in shown
