"""The shipped query adapter: loads, fits the embedding model, keeps queries normalized, and a
bad file is refused with a message that names it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from contextcore.errors import ModelError
from contextcore.query_adapter import SHIPPED_ADAPTER, QueryAdapter, load_query_adapter

DIM = 384  # all-MiniLM-L6-v2


def _unit_rows(n: int, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_shipped_adapter_is_a_float16_square_matrix_of_the_models_dimension() -> None:
    stored = np.load(SHIPPED_ADAPTER, allow_pickle=False)
    assert stored.dtype == np.float16
    assert stored.shape == (DIM, DIM)
    assert SHIPPED_ADAPTER.stat().st_size < 300_000


def test_the_shipped_adapter_loads_finite_and_sized_for_the_model() -> None:
    adapter = load_query_adapter()
    assert isinstance(adapter, QueryAdapter)
    assert adapter.dim == DIM
    assert adapter.weights.dtype == np.float32
    assert np.isfinite(adapter.weights).all()


def test_the_adapter_maps_a_normalized_batch_to_normalized_float32_vectors() -> None:
    adapter = load_query_adapter()
    assert adapter is not None
    out = adapter.apply(_unit_rows(32))
    assert out.shape == (32, DIM)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_the_adapter_moves_queries_but_stays_near_the_identity() -> None:
    adapter = load_query_adapter()
    assert adapter is not None
    queries = _unit_rows(64, seed=1)
    cosines = np.sum(adapter.apply(queries) * queries, axis=1)
    # Not the identity: every query moves; trained toward it: none is turned away.
    assert np.all(cosines < 0.9999)
    assert np.all(cosines > 0.5)
    assert not np.allclose(adapter.weights, np.eye(DIM), atol=1e-3)


def test_a_zero_query_stays_zero_instead_of_turning_into_nan() -> None:
    adapter = load_query_adapter()
    assert adapter is not None
    out = adapter.apply(np.zeros((1, DIM), dtype=np.float32))
    assert np.all(out == 0)


def test_vectors_of_another_models_dimension_are_refused() -> None:
    adapter = load_query_adapter()
    assert adapter is not None
    with pytest.raises(ModelError, match="384-dimensional"):
        adapter.apply(np.ones((2, 64), dtype=np.float32) / 8)


def test_an_engine_built_for_another_model_gets_no_adapter() -> None:
    from context_broker.server.settings import AppConfig

    from contextcore.catalog import Catalog
    from contextcore.factory import build_search
    from tests.support.hash_embedder import HashEmbedder

    engine = build_search(AppConfig(), Catalog([]), HashEmbedder())
    assert engine.adapter is None


def test_an_explicit_path_loads_that_file(tmp_path: Path) -> None:
    path = tmp_path / "scaled.npy"
    np.save(path, (2 * np.eye(4)).astype(np.float32))
    adapter = load_query_adapter(path)
    assert adapter is not None
    out = adapter.apply(np.array([[3.0, 0.0, 4.0, 0.0]], dtype=np.float32))
    np.testing.assert_allclose(out, [[0.6, 0.0, 0.8, 0.0]], atol=1e-6)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not a numpy file", "cannot be read as a .npy matrix"),
        (np.ones((4, 3), dtype=np.float16), r"has shape \(4, 3\)"),
        (np.ones(4, dtype=np.float32), r"has shape \(4,\)"),
        (np.eye(4, dtype=np.int32), "not float16 or float32"),
        (np.full((2, 2), np.nan, dtype=np.float16), "NaN or infinite"),
        (np.array([{"w": 1}], dtype=object), "cannot be read as a .npy matrix"),
    ],
)
def test_a_bad_adapter_file_is_refused_with_a_message_naming_it(
    tmp_path: Path, content: object, message: str
) -> None:
    path = tmp_path / "adapter.npy"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        np.save(path, content, allow_pickle=True)
    with pytest.raises(ModelError, match=message) as info:
        load_query_adapter(path)
    assert str(path) in str(info.value)


def test_a_missing_adapter_file_is_refused_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "absent.npy"
    with pytest.raises(ModelError, match="cannot be read") as info:
        load_query_adapter(path)
    assert str(path) in str(info.value)
