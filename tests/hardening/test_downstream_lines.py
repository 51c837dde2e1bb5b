"""Lines read from a downstream server: a message arriving in many chunks comes out whole,
and a line longer than the limit is dropped whole while the lines after it still arrive, so
a server cannot make the broker hold more than the limit."""

from __future__ import annotations

from context_broker.server.wire.jsonrpc_lines import LineSplitter


def _feed_all(splitter: LineSplitter, data: bytes, chunk: int) -> list[bytes]:
    out = []
    for start in range(0, len(data), chunk):
        out += splitter.feed(data[start : start + chunk])
    return out


def test_lines_split_across_chunks_come_out_whole_and_blank_lines_are_skipped() -> None:
    data = b'{"a": 1}\n\n  \n{"b": "' + b"x" * 5000 + b'"}\n{"c"'
    for chunk in (1, 7, 64, 10_000):
        splitter = LineSplitter()
        assert _feed_all(splitter, data, chunk) == [b'{"a": 1}', b'{"b": "' + b"x" * 5000 + b'"}']
        assert splitter.feed(b": 3}\n") == [b'{"c": 3}']
        assert splitter.skipped == 0


def test_a_line_over_the_limit_is_dropped_and_the_next_lines_still_arrive() -> None:
    too_long = b"y" * 2500
    data = b"first\n" + too_long + b"\nsecond\n" + b"z" * 1001 + b"\nthird\n"
    for chunk in (1, 100, 999, 5000):
        splitter = LineSplitter(limit=1000)
        assert _feed_all(splitter, data, chunk) == [b"first", b"second", b"third"], chunk
        assert splitter.skipped == 2
