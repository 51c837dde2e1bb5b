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
