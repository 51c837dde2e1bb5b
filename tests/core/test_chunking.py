from __future__ import annotations

from contextcore.chunking import chunk_text, item_chunks, item_content
from contextcore.items import Rule, Tool


def test_rule_content_is_name_description_and_text() -> None:
    assert item_content(Rule("a", "Body", "Desc")) == "a: Desc\n\nBody"
    assert item_content(Rule("a", "Body")) == "a\n\nBody"


def test_tool_content_lists_parameter_names_and_descriptions() -> None:
    tool = Tool(
        "time",
        "convert",
        "Convert time",
        {"properties": {"source": {"description": "From zone"}, "target": {}}},
    )
    assert item_content(tool) == "convert: Convert time\n\nParameters: source: From zone; target"


def test_short_paragraphs_are_packed_up_to_the_limit() -> None:
    assert chunk_text("one\n\ntwo\n\nthree", limit=9) == ["one\ntwo", "three"]


def test_long_paragraphs_split_by_sentence_and_no_chunk_exceeds_the_limit() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(60))
    chunks = chunk_text(text, limit=100)
    assert len(chunks) > 10 and all(len(c) <= 100 for c in chunks)
    assert " ".join(chunks).replace("\n", " ").split() == text.split()


def test_a_sentence_without_breaks_is_cut_at_word_boundaries() -> None:
    chunks = chunk_text("word " * 300, limit=50)
    assert all(len(c) <= 50 for c in chunks) and all(c.strip() for c in chunks)


def test_later_chunks_carry_the_item_name() -> None:
    rule = Rule("deploy", "\n\n".join("x" * 300 for _ in range(3)))
    chunks = item_chunks(rule)
    assert len(chunks) == 3 and all(c.startswith("deploy") for c in chunks)
