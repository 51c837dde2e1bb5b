"""Small talk: a message that asks for nothing the catalog holds selects nothing.

Relevance floors judge each item alone, so a greeting or a "thanks, that's all" can still
clear them on a large catalog: with hundreds of tools, one is always somewhat close. This is
judged on the request as a whole instead. A short list of messages that ask for no item
(``data/small_talk.txt``: greetings, thanks, acknowledgements, farewells, talk about the
conversation) is embedded once; a request is small talk when every text it is searched by
(the message, its parts, each of its sentences, the host's steps) is at least as close in
meaning to one of those as any item that may be selected scores for it (the score the search
ranks by, cosine plus the lexical part, so an item sharing the message's words keeps it).
A follow-up that reads its conversation ("and in Oslo?" after a time question) is not judged
alone: the conversation decides it. On the shared sets no request the catalog serves loses
its tools, while about half of the
off-topic messages the list was not tuned on select nothing more (benchmarks/reach.py).
"""

from __future__ import annotations

import threading
from importlib import resources

import numpy as np
import numpy.typing as npt

from .embedding import Embedder, Vectors
from .embedding_cache import EmbeddingCache, MemoryEmbeddingCache, embed_cached, text_hash

__all__ = ["SmallTalk", "load_phrases"]


def load_phrases() -> tuple[str, ...]:
    """The packaged small-talk messages."""
    text = resources.files(__package__).joinpath("data/small_talk.txt").read_text("utf-8")
    lines = (line.strip() for line in text.splitlines())
    return tuple(line for line in lines if line and not line.startswith("#"))


def _unit(vectors: Vectors) -> npt.NDArray[np.float32]:
    array = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return (array / np.where(norms == 0, 1.0, norms)).astype(np.float32)


class SmallTalk:
    """The small-talk messages' vectors, embedded on first use by the search's embedder."""

    def __init__(
        self, phrases: tuple[str, ...] | None = None, cache: EmbeddingCache | None = None
    ) -> None:
        self.phrases = load_phrases() if phrases is None else phrases
        # The search's embedding cache: replicas sharing it embed the phrases once.
        self._cache = cache if cache is not None else MemoryEmbeddingCache()
        self._vectors: npt.NDArray[np.float32] | None = None
        self._model = ""
        self._lock = threading.Lock()

    def vectors(self, embedder: Embedder) -> npt.NDArray[np.float32]:
        """The phrases' unit vectors under ``embedder`` (embedded again for another model),
        read from the embedding cache where it has them."""
        with self._lock:
            if self._vectors is None or self._model != embedder.model_name:
                self._vectors = _unit(self._embedded(embedder))
                self._model = embedder.model_name
            return self._vectors

    def _embedded(self, embedder: Embedder) -> Vectors:
        hashes = [text_hash(p) for p in self.phrases]
        known, _ = embed_cached(self._cache, embedder, dict(zip(hashes, self.phrases, strict=True)))
        return np.stack([known[h] for h in hashes]).astype(np.float32)

    def judge(
        self,
        embedder: Embedder,
        texts: Vectors,
        best_item: npt.NDArray[np.float32],
    ) -> bool:
        """Whether every row of ``texts`` (the request's own texts, embedded) is at least as
        close to a small-talk message as the text's best item scores (``best_item``, one
        per text: the score the search ranks by, cosine plus the lexical part, so an item
        sharing the message's words counts that too); False when there is nothing to
        compare."""
        if not self.phrases or len(texts) == 0:
            return False
        best_talk = (_unit(texts) @ self.vectors(embedder).T).max(axis=1)
        return bool(np.all(best_talk >= best_item))
