"""The assembly tool: assemble_context builds the request context and the complete LLM input
from an assembly model (a named one, an inline one, or a preset)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from contextcore.assembly import AssemblyReport, assemble, model_pipeline, resolve_model

from ._spec import Args, Out, ToolContext, ToolSpec, UserMessage
from .history import ReportOut

__all__ = ["ASSEMBLE_CONTEXT", "ASSEMBLY_TOOLS"]


class AssembleArgs(Args):
    session_id: str = Field(description="A session id returned by create_session.")
    message: UserMessage = Field(
        description="The user's message; agent items are searched with it."
    )
    model: str | dict[str, Any] | None = Field(
        None,
        description="A model named in the config, or a model object: {intro?, components: "
        "[{kind: rules|references|tools|summary|snapshot|history|message|literal, framing?, "
        "text? (literal), children?}], filters?: preset name or filter list}. Nesting only "
        "organises (depth-first, only leaves emit); at most 6 levels and 128 components.",
    )
    preset: str | None = Field(
        None,
        description="A built-in model instead of model: 'default' (used when neither "
        "is given) or 'topic' (the topic filters).",
    )


class ComponentOut(Out):
    path: str = Field(description="Where the component is in the model, or 'intro'.")
    kind: str
    messages: list[int] = Field(description="Positions of the messages it emitted.")
    tokens: int = Field(description="Estimated tokens of those messages.")


class AssemblyReportOut(Out):
    """Where the budget went."""

    model: str = Field(description="The model used: its name, 'inline' or the preset.")
    components: list[ComponentOut]
    total_tokens: int
    window_start: int = Field(
        description="Position in the session's history where the window began."
    )
    filters: ReportOut = Field(description="What the history filters did.")
    warnings: list[str]

    @classmethod
    def of(cls, label: str, report: AssemblyReport) -> AssemblyReportOut:
        rows = [ComponentOut.model_validate(c) for c in report.components]
        return cls(
            model=label,
            components=rows,
            total_tokens=report.total_tokens,
            window_start=report.window_start,
            filters=ReportOut.of(report.filters),
            warnings=list(report.warnings),
        )


class AssembleOut(Out):
    request_id: str
    messages: list[dict[str, Any]] = Field(description="The complete LLM input, in order.")
    report: AssemblyReportOut


def _assemble(ctx: ToolContext, args: AssembleArgs) -> AssembleOut:
    # Everything that can reject the model runs before the turn is recorded.
    label, model = resolve_model(args.model, args.preset, ctx.models)
    service = ctx.history
    pipeline = model_pipeline(model, service.registry, service.config.preset)
    context = ctx.broker.build_request_context(args.session_id, args.message)
    ctx.built(context)
    if service.config.auto_summarize:
        service.summarize(args.session_id, summarizer=ctx.summarizer)
    result = assemble(
        context,
        ctx.broker.lookup,
        service.history(args.session_id),
        model,
        pipeline=pipeline,
        policy=service.policy,
        max_tokens=service.config.max_tokens,
        directory=ctx.tools,
    )
    return AssembleOut(
        request_id=context.request_id,
        messages=result.messages,
        report=AssemblyReportOut.of(label, result.report),
    )


def _text(out: AssembleOut) -> str:
    r = out.report
    parts = [f"{c.path} {c.kind} ~{c.tokens}" for c in r.components if c.messages]
    lines = [
        f"Request {out.request_id}: {len(out.messages)} message(s), ~{r.total_tokens} tokens "
        f"(model {r.model}; {r.filters.messages_in} history message(s) in the window, "
        f"{r.filters.dropped} dropped).",
        "Tokens by component: " + (", ".join(parts) or "none"),
    ]
    lines += [f"warning: {w}" for w in r.warnings]
    return "\n".join(lines)


ASSEMBLE_CONTEXT: ToolSpec = ToolSpec(  # type: ignore[type-arg]
    "assemble_context",
    "Build the request context for the user's message exactly as build_request_context does "
    "(same record, same turn log) and return the complete LLM input assembled by a model: "
    "intro, rules, references, tools, summary, task snapshot, history window, user message "
    "and literal texts in the model's order, with the history filters applied. The report "
    "says which component emitted which messages and how many tokens each took.",
    AssembleArgs,
    AssembleOut,
    _assemble,
    _text,
)

ASSEMBLY_TOOLS: tuple[ToolSpec, ...] = (ASSEMBLE_CONTEXT,)  # type: ignore[type-arg]
