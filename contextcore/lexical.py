"""BM25 over chunks, with postings held as numpy arrays so a query costs a few vector adds."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["Bm25Index", "tokenize"]

_WORD = re.compile(r"[A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_STOPWORDS = frozenset(
    [
        "a",
        "about",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "can",
        "could",
        "do",
        "does",
        "for",
        "from",
        "get",
        "give",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "please",
        "some",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "this",
        "to",
        "us",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "would",
        "you",
        "your",
        "i'm",
        "want",
        "need",
        "like",
        "also",
        "just",
    ]
)


def _stem(word: str) -> str:
    """A light plural/suffix folding: enough to match 'files' with 'file', 'running' with 'run'."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Lowercased, stemmed terms; camelCase and snake_case names are split into words."""
    out: list[str] = []
    for raw in _WORD.findall(text):
        parts = _CAMEL.findall(raw) if not raw.islower() else [raw]
        for part in parts:
            word = part.lower()
            if word not in _STOPWORDS:
                out.append(_stem(word))
    return out


class Bm25Index:
    """Okapi BM25 (k1=1.2, b=0.75) over a fixed list of documents."""

    def __init__(self, documents: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.size = len(documents)
        token_lists = [tokenize(d) for d in documents]
        lengths = np.array([len(t) for t in token_lists], dtype=np.float32)
        avg = float(lengths.mean()) if self.size and lengths.mean() > 0 else 1.0
        norm = k1 * (1.0 - b + b * lengths / avg)
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for doc, tokens in enumerate(token_lists):
            for term, tf in Counter(tokens).items():
                ids, tfs = postings.setdefault(term, ([], []))
                ids.append(doc)
                tfs.append(float(tf))
        self._postings: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] = {}
        for term, (ids, tfs) in postings.items():
            idx = np.asarray(ids, dtype=np.int64)
            freq = np.asarray(tfs, dtype=np.float32)
            idf = math.log(1.0 + (self.size - len(ids) + 0.5) / (len(ids) + 0.5))
            weight = idf * freq * (k1 + 1.0) / (freq + norm[idx])
            self._postings[term] = (idx, weight.astype(np.float32))

    def scores(self, query: str) -> npt.NDArray[np.float32]:
        """BM25 score of every document for ``query`` (zeros where no term matches)."""
        out = np.zeros(self.size, dtype=np.float32)
        for term in set(tokenize(query)):
            posting = self._postings.get(term)
            if posting is not None:
                out[posting[0]] += posting[1]
        return out
