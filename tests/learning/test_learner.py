"""The usage learner on its own: no history ranks as before, forgetting is exact, decay and
bounds hold. A deterministic hashing embedder stands in for the model."""

from __future__ import annotations

import numpy as np

from contextcore.catalog import Catalog
from contextcore.items import ItemRef, Rule
from contextcore.learning import LearningSettings, UsageLearner
from contextcore.search import SearchEngine
from tests.support.hash_embedder import HashEmbedder

QUERY = "how do I roll back a failed deployment"
TARGET = ItemRef("rule", "incident-runbook")


def engine(learner: UsageLearner | None) -> SearchEngine:
    names = ["deploy-checklist", "incident-runbook", "code-review", "sql-safety", "naming"]
    items = [Rule(name=n, text=f"{n.replace('-', ' ')} guidance and notes") for n in names]
    return SearchEngine(Catalog(items), HashEmbedder(), learner=learner)


def ranking(e: SearchEngine, query: str = QUERY) -> list[tuple[str, float]]:
    hits = e.search(query, top_n=5, apply_include_score=False).hits
    return [(h.ref.key, h.score) for h in hits]


def vector(text: str) -> np.ndarray:
    return HashEmbedder().embed([text])[0]


def test_an_empty_learner_ranks_exactly_as_no_learner() -> None:
    assert ranking(engine(UsageLearner())) == ranking(engine(None))
    disabled = UsageLearner(LearningSettings(enabled=False))
    disabled.learn(TARGET, vector(QUERY), session_id="s1")
    assert ranking(engine(disabled)) == ranking(engine(None))


def test_a_learned_request_lifts_its_item_and_forgetting_its_session_restores_the_ranking() -> None:
    learner = UsageLearner()
    e = engine(learner)
    cold = ranking(e)
    assert cold[0][0] != TARGET.key
    learner.learn(TARGET, vector(QUERY), session_id="s1")
    learner.learn(TARGET, vector(QUERY), session_id="s1")
    assert ranking(e)[0][0] == TARGET.key
    other = ItemRef("rule", "naming")
    learner.learn(other, vector("what should I call this variable"), session_id="s2")
    assert learner.forget("s1") == 1
    assert learner.evidence(TARGET) == 0.0 and learner.evidence(other) == 1.0
    assert [k for k, _ in ranking(e)][:1] == [cold[0][0]]
    learner.forget()
    assert ranking(e) == cold and learner.learned == 0


def test_evidence_decays_with_the_half_life() -> None:
    now = [1_000_000.0]
    learner = UsageLearner(LearningSettings(decay_days=2.0), clock=lambda: now[0])
    learner.learn(TARGET, vector(QUERY), session_id="s1")
    assert learner.evidence(TARGET) == 1.0
    now[0] += 2 * 86_400
    assert abs(learner.evidence(TARGET) - 0.5) < 1e-9


def test_recent_requests_per_item_are_bounded_and_below_min_evidence_nothing_changes() -> None:
    learner = UsageLearner(LearningSettings(max_requests_per_item=3, min_evidence=5))
    e = engine(learner)
    cold = ranking(e)
    for i in range(4):
        learner.learn(TARGET, vector(f"{QUERY} {i}"), session_id="s1")
    per_ring = 3 * vector(QUERY).nbytes
    assert learner.memory_bytes() < per_ring + 64 * 1024
    assert ranking(e) == cold  # 4 requests, 5 needed


def test_forgetting_a_session_ranks_as_a_learner_that_never_saw_it() -> None:
    """Forgetting frees the session's request slots; what the others taught is kept whole,
    and new requests reuse the freed slots."""
    refs = [TARGET, ItemRef("rule", "naming"), ItemRef("rule", "code-review")]
    asks = ["roll back the deployment", "name this variable", "review my change", QUERY]
    both, only = UsageLearner(), UsageLearner()
    for i, ask in enumerate(asks * 3):
        ref = refs[i % len(refs)]
        both.learn(ref, vector(f"{ask} {i}"), session_id="s1", at=0.0)
        both.learn(ref, vector(f"{ask} again {i}"), session_id="s2", at=0.0)
        only.learn(ref, vector(f"{ask} again {i}"), session_id="s2", at=0.0)
    assert both.forget("s1") == len(refs)
    for ask in asks:
        assert ranking(engine(both), ask) == ranking(engine(only), ask)
    size = both.memory_bytes()
    for i in range(6):
        both.learn(refs[i % 3], vector(f"later {i}"), session_id="s3", at=0.0)
        only.learn(refs[i % 3], vector(f"later {i}"), session_id="s3", at=0.0)
    # Only the new session's sums were added: its requests took the freed slots.
    assert both.memory_bytes() == size + len(refs) * vector(QUERY).nbytes
    for ask in asks:
        assert ranking(engine(both), ask) == ranking(engine(only), ask)


WORDS = [
    "invoice",
    "ledger",
    "pixel",
    "kernel",
    "harbor",
    "violin",
    "glacier",
    "cactus",
    "orbit",
    "lantern",
    "quartz",
    "meadow",
    "falcon",
    "tundra",
    "copper",
    "sonnet",
    "walnut",
    "prism",
    "canyon",
    "beacon",
    "ember",
    "saffron",
    "cobalt",
    "willow",
    "marble",
    "thistle",
    "nimbus",
    "garnet",
    "fjord",
    "juniper",
]


def big_engine(learner: UsageLearner | None) -> SearchEngine:
    """300 rules of unrelated words and one, ``sleep-check``, that no request names."""
    rules = [
        Rule(name=f"rule-{i}", text=" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(6)))
        for i in range(300)
    ]
    rules.append(Rule(name="sleep-check", text="timezone offset lookup table"))
    return SearchEngine(Catalog(rules), HashEmbedder(), learner=learner)


SLEEP = ItemRef("rule", "sleep-check")
ASKS = ["would calling grandma now wake her", "would calling grandpa now wake him"]


def keys(e: SearchEngine, query: str, top_n: int = 5) -> list[str]:
    hits = e.search(query, top_n=top_n, top_k=10_000, apply_include_score=False).hits
    return [h.ref.key for h in hits]


def test_an_item_with_reach_evidence_is_lifted_from_anywhere_one_without_only_near_the_top() -> (
    None
):
    query = "would calling auntie now wake her"
    assert SLEEP.key not in keys(big_engine(None), query, top_n=150)
    for reach, found in ((3, True), (4, False)):
        learner = UsageLearner(LearningSettings(reach_evidence=reach))
        for ask in [*ASKS, "would calling my uncle now wake him"]:
            learner.learn(SLEEP, vector(ask), session_id="s1", at=0.0)
        assert (keys(big_engine(learner), query)[:1] == [SLEEP.key]) is found


def test_a_leading_items_companions_come_right_after_it_and_forgetting_removes_them() -> None:
    query = "how do I roll back a failed deployment"
    cold = ranking(engine(None), query)
    leader, companion = ItemRef("rule", cold[0][0].split(":")[1]), ItemRef("rule", "naming")
    assert companion.key != cold[1][0]
    learner = UsageLearner(LearningSettings(weight=0.0, companion_weight=1.0))
    for turn in range(3):
        for ref in (leader, companion):
            learner.learn(ref, vector(f"unrelated ask {turn}"), session_id="s1", turn=turn)
    learned = ranking(engine(learner), query)
    assert [k for k, _ in learned][:2] == [leader.key, companion.key]
    learner.forget("s1")
    assert ranking(engine(learner), query) == cold


def test_forgetting_a_session_removes_exactly_the_companions_it_taught() -> None:
    refs = [TARGET, ItemRef("rule", "naming"), ItemRef("rule", "code-review")]
    both, only = UsageLearner(), UsageLearner()
    for turn in range(4):
        for i, ref in enumerate(refs[: 2 + turn % 2]):
            ask = f"ask {turn} {i}"
            both.learn(ref, vector(ask), session_id="s1", turn=turn)
            both.learn(refs[(i + 1) % 3], vector(ask), session_id="s2", turn=turn)
            only.learn(refs[(i + 1) % 3], vector(ask), session_id="s2", turn=turn)
    both.forget("s1")
    for ask in [QUERY, "name this variable", "review my change"]:
        assert ranking(engine(both), ask) == ranking(engine(only), ask)
