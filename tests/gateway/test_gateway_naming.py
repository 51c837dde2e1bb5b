from __future__ import annotations

import random
import re

from context_broker.server.gateway import (
    assign_names,
    sanitize,
    split_resource_uri,
    wrap_resource_uri,
)

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_sanitize_keeps_valid_characters_and_replaces_the_rest() -> None:
    assert sanitize("read-file_2") == "read-file_2"
    assert sanitize("read.file") == "read_file"
    assert sanitize("ünïcode tool/x") == "_n_code_tool_x"


def test_clean_names_are_server_double_underscore_tool() -> None:
    names = assign_names([("time", "get_current_time"), ("fs", "read-file"), ("fs2", "read_file")])
    assert names[("time", "get_current_time")] == "time__get_current_time"
    assert names[("fs", "read-file")] == "fs__read-file"
    assert names[("fs2", "read_file")] == "fs2__read_file"


def test_a_collision_after_sanitizing_keeps_the_clean_name_and_suffixes_the_other() -> None:
    names = assign_names([("fs", "read.file"), ("fs", "read_file")])
    assert names[("fs", "read_file")] == "fs__read_file"
    suffixed = names[("fs", "read.file")]
    assert suffixed.startswith("fs__read_file_") and suffixed != "fs__read_file"
    assert all(VALID.match(n) for n in names.values())


def test_server_names_that_sanitize_alike_get_distinct_deterministic_names() -> None:
    pairs = [("my.server", "read-file"), ("my server", "read-file"), ("my_server", "read-file")]
    first = assign_names(pairs)
    assert first[("my_server", "read-file")] == "my_server__read-file"
    assert len(set(first.values())) == 3
    shuffled = pairs[:]
    random.Random(3).shuffle(shuffled)
    assert assign_names(shuffled) == first


def test_names_over_64_characters_are_cut_with_a_hash_suffix() -> None:
    long_a, long_b = "x" * 70 + "_alpha", "x" * 70 + "_beta"
    names = assign_names([("srv", long_a), ("srv", long_b)])
    assert all(len(n) <= 64 and VALID.match(n) for n in names.values())
    assert names[("srv", long_a)] != names[("srv", long_b)]
    assert names == assign_names([("srv", long_b), ("srv", long_a)])


def test_order_of_assignment_does_not_change_any_name() -> None:
    pairs = [(f"s{i % 3}", f"tool.{i % 5}") for i in range(15)] + [("s0", "tool_1")]
    expected = assign_names(pairs)
    for seed in range(5):
        shuffled = pairs[:]
        random.Random(seed).shuffle(shuffled)
        assert assign_names(shuffled) == expected
    assert len(set(expected.values())) == len(set(pairs))


def test_resource_uris_round_trip_through_the_wrapper() -> None:
    for server, uri in [("everything", "demo://resource/static/document/a b.md"), ("a.b", "x")]:
        wrapped = wrap_resource_uri(server, uri)
        assert wrapped.startswith("downstream://")
        assert split_resource_uri(wrapped) == (server, uri)
    assert split_resource_uri("file:///etc/passwd") is None
