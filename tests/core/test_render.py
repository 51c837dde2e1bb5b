from __future__ import annotations

from contextcore.items import ItemRef
from contextcore.render import render_markdown, summary_line
from contextcore.services.broker import ContextBroker
from contextcore.sessions import RequestItem


def row(
    kind: str, name: str, mode: str, server: str | None = None, score: float | None = None
) -> RequestItem:
    return RequestItem(ItemRef(kind, name, server), mode, score)  # type: ignore[arg-type]


def test_summary_line_counts_types_and_modes_like_the_design() -> None:
    items = [
        row("rule", "a", "agent"),
        row("rule", "b", "agent"),
        row("rule", "c", "agent"),
        row("rule", "d", "always"),
        row("rule", "e", "always"),
        row("reference", "f", "agent"),
        row("reference", "g", "manual"),
        row("tool", "h", "manual", "s"),
        row("tool", "i", "manual", "s"),
        row("tool", "j", "manual", "s"),
    ]
    assert summary_line(items) == (
        "5 rules (3 agent, 2 always), 2 references (1 agent, 1 manual), 3 tools (all manual)"
    )
    assert summary_line([row("rule", "a", "always")]) == "1 rule (always)"
    assert summary_line([]) == "no items"


def test_markdown_has_three_sections_badges_scores_and_ordering(broker: ContextBroker) -> None:
    sid = broker.create_session().session_id
    ctx = broker.build_request_context(sid, "current time in a timezone", include_score=1.0)
    text = render_markdown(ctx, broker.lookup)
    rules = text.index("## Rules")
    refs = text.index("## References")
    tools = text.index("## Tools")
    assert rules < refs < tools
    assert text.index("**tone**") < text.index("**commits**")  # priority 5 before 0
    assert "**time/get_current_time** `agent` 0." in text
    assert "**git/git_log** `always`" in text
    score = next(i.similarity_score for i in ctx.items if i.ref.name == "get_current_time")
    assert f"{score:.2f}" in text
