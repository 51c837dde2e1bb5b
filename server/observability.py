"""Health, metrics and traces: what the broker did, for a balancer, a dashboard or a tracer.

One :class:`Observer` per server (no module-level state): Prometheus metrics in its own
registry (tool calls and latency, search modes, selections per include mode, downstream
states and call errors, store errors) and, when a tracer provider is given, one span per
tool call with search, store and downstream child spans. The caller's trace context comes
from ``_meta.traceparent`` and is passed on to downstream servers the same way.
:func:`readiness` answers ``/readyz``."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from context_broker.server.settings import TelemetryConfig
from mcp import types
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from contextcore.sessions import RequestContext

__all__ = [
    "OTHER_SERVER",
    "Observer",
    "StatusRow",
    "build_tracer_provider",
]

log = logging.getLogger(__name__)

_PROPAGATOR = TraceContextTextMapPropagator()
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
StatusRow = tuple[str, str]  # (server name, state)
OTHER_SERVER = "other"
"""The ``server`` label of calls naming a server the config does not have."""


def build_tracer_provider(config: TelemetryConfig) -> trace.TracerProvider | None:
    """A tracer provider exporting over OTLP/HTTP to ``[telemetry] otlp_endpoint``; None when
    no endpoint is configured. Needs the ``telemetry`` extra (opentelemetry-sdk)."""
    if not config.otlp_endpoint:
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        from contextcore.errors import ConfigError

        raise ConfigError(
            f"telemetry.otlp_endpoint is {config.otlp_endpoint!r} but the OpenTelemetry SDK is "
            f"not installed ({exc.name}); install mcp-context-broker[telemetry] or remove "
            "otlp_endpoint",
            field="telemetry.otlp_endpoint",
        ) from None
    provider = TracerProvider(resource=Resource.create({"service.name": config.service_name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=config.otlp_endpoint)))
    return provider


def _carrier(meta: Any) -> dict[str, str]:
    if meta is None:
        return {}
    raw = meta.model_dump(by_alias=True) if hasattr(meta, "model_dump") else dict(meta)
    return {
        k: v for k, v in raw.items() if k in ("traceparent", "tracestate") and isinstance(v, str)
    }


class _DownstreamStates(Collector):
    """``context_broker_downstream_up{server,state}``, read from the gateway at scrape time."""

    def __init__(self, states: Callable[[], Iterable[StatusRow]]) -> None:
        self.states = states

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "context_broker_downstream_up",
            "1 when the downstream server is connected, else 0; the state is a label.",
            labels=["server", "state"],
        )
        for name, state in self.states():
            family.add_metric([name, state], 1.0 if state == "connected" else 0.0)
        yield family


class Observer:
    """Metrics and (optional) traces of one broker server."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.calls = Counter(
            "context_broker_tool_calls",
            "Tool calls by tool and outcome.",
            ["tool", "outcome"],
            registry=r,
        )
        self.latency = Histogram(
            "context_broker_tool_call_seconds",
            "Tool call latency by tool.",
            ["tool"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.searches = Counter(
            "context_broker_searches",
            "Request contexts built, by search mode.",
            ["mode"],
            registry=r,
        )
        self.selections = Counter(
            "context_broker_selections",
            "Items put in request contexts, by include mode and item type.",
            ["include_mode", "type"],
            registry=r,
        )
        self.downstream_calls = Counter(
            "context_broker_downstream_calls", "Calls forwarded downstream.", ["server"], registry=r
        )
        self.downstream_errors = Counter(
            "context_broker_downstream_call_errors",
            "Forwarded calls that ended in an error.",
            ["server"],
            registry=r,
        )
        self.store_errors = Counter(
            "context_broker_store_errors",
            "Session store operations that failed.",
            ["operation"],
            registry=r,
        )
        self.tracer = tracer_provider.get_tracer("context-broker") if tracer_provider else None

    def watch_downstream(self, states: Callable[[], Iterable[StatusRow]]) -> None:
        """Report the downstream servers' states (``states`` is read at every scrape)."""
        self.registry.register(_DownstreamStates(states))

    def metrics(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)

    @contextmanager
    def span(self, name: str, **attributes: Any) -> Iterator[trace.Span | None]:
        """A child span of the current one (nothing without a tracer)."""
        if self.tracer is None:
            yield None
            return
        with self.tracer.start_as_current_span(name, attributes=attributes) as span:
            yield span

    @contextmanager
    def tool_call(
        self, tool: str, meta: Any = None
    ) -> Iterator[Callable[[types.CallToolResult], None]]:
        """Time one tool call and trace it under the caller's ``_meta.traceparent``; the
        yielded function records the result's outcome."""
        started = time.perf_counter()
        outcome = ["error"]

        def done(result: types.CallToolResult) -> None:
            outcome[0] = "error" if result.is_error else "ok"

        carrier = _carrier(meta)
        token = None
        if carrier:
            token = otel_context.attach(_PROPAGATOR.extract(carrier))
        try:
            with self.span(f"tool {tool}", **{"mcp.tool.name": tool}) as span:
                yield done
                if span is not None and outcome[0] == "error":
                    span.set_status(trace.StatusCode.ERROR)
        finally:
            if token is not None:
                otel_context.detach(token)
            self.calls.labels(tool, outcome[0]).inc()
            self.latency.labels(tool).observe(time.perf_counter() - started)

    def context_built(self, context: RequestContext) -> None:
        """Count a request context (its search mode, its items by include mode and type) and
        mark the current span (the tool call that built it) with its id and size."""
        self.searches.labels(context.search_mode or "none").inc()
        for row in context.items:
            self.selections.labels(row.include_mode, row.ref.type).inc()
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attributes(
                {
                    "context_broker.request_id": context.request_id,
                    "context_broker.search_mode": context.search_mode or "none",
                    "context_broker.items": len(context.items),
                }
            )

    @contextmanager
    def downstream_call(
        self, server: str, tool: str, *, configured: bool = True
    ) -> Iterator[dict[str, str]]:
        """Count and trace one forwarded call; yields the ``_meta`` trace context to pass on.
        A server the config does not name (any string a host sends) is counted under
        :data:`OTHER_SERVER`, so hosts cannot add series. The caller marks failures with
        :meth:`downstream_failed`."""
        self.downstream_calls.labels(server if configured else OTHER_SERVER).inc()
        with self.span(
            f"downstream {server}/{tool}", **{"mcp.server": server, "mcp.tool.name": tool}
        ):
            carrier: dict[str, str] = {}
            _PROPAGATOR.inject(carrier)
            yield carrier

    def downstream_failed(self, server: str, *, configured: bool = True) -> None:
        """Count a forwarded call that ended in an error (labelled as :meth:`downstream_call`)."""
        self.downstream_errors.labels(server if configured else OTHER_SERVER).inc()

    def traced(self, kind: str, target: Any) -> Any:
        """``target`` (a session store or the search engine) with each method call in a
        ``<kind>.<method>`` span; store failures are counted."""
        return _Traced(self, kind, target)


class _Traced:
    """Delegates every attribute to the wrapped object; calls go through a span."""

    def __init__(self, observer: Observer, kind: str, target: Any) -> None:
        self._observer = observer
        self._kind = kind
        self._target = target

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if name.startswith("_") or not callable(value):
            return value
        observer, kind = self._observer, self._kind

        def call(*args: Any, **kwargs: Any) -> Any:
            with observer.span(f"{kind}.{name}"):
                try:
                    return value(*args, **kwargs)
                except Exception:
                    if kind == "store":
                        observer.store_errors.labels(name).inc()
                    raise

        return call
