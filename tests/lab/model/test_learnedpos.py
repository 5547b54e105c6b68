"""The learned-positions part of the Positions view (gptlab.lab.model.learnedpos, POST
/api/learned_positions): the table is the run's own wpe weights, PE . PE^T and the cosines
are their products (float64), each position's neighbours are the nearest others by cosine;
a run without learned positions is a one-line 400."""

from __future__ import annotations

import numpy as np
import pytest

from gptlab.lab.runs import Runs


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory, copy_tiny_run, save_char_model, tiny_text):
    """The tiny run (learned positions) and a RoPE run."""
    root = tmp_path_factory.mktemp("runs")
    copy_tiny_run(root / "tiny")
    save_char_model(root / "llama", tiny_text, preset="tiny-llama")
    return root


def test_table_products_and_neighbours_are_the_runs_wpe(client, runs_root, post):
    d = post(client, "/api/learned_positions", {"run": "tiny", "neighbours": 4})
    wpe = Runs(runs_root).load("tiny").model.wpe.weight.detach().double().numpy()
    assert (d["positions"], d["block_size"], d["n_embd"]) == (32, 32, 32)
    np.testing.assert_allclose(d["table"], wpe, rtol=0, atol=1e-12)
    np.testing.assert_allclose(d["similarity"], wpe @ wpe.T, rtol=1e-12, atol=1e-12)
    unit = wpe / np.linalg.norm(wpe, axis=1, keepdims=True)
    cos = unit @ unit.T
    np.testing.assert_allclose(d["cosine"], cos, rtol=0, atol=1e-12)
    for p, near in enumerate(d["neighbours"]):
        others = np.delete(np.arange(32), p)
        best = others[np.argsort(-cos[p, others], kind="stable")[:4]]
        assert [n["position"] for n in near] == best.tolist()
        assert [n["cosine"] for n in near] == pytest.approx(cos[p, best].tolist(), abs=1e-12)
    gaps = np.subtract.outer(np.arange(32), np.arange(32)).T  # n - m
    assert d["adjacent_cosine"] == pytest.approx(cos[gaps == 1].mean(), abs=1e-12)
    assert d["distant_cosine"] == pytest.approx(cos[gaps >= 8].mean(), abs=1e-12)


def test_fewer_positions(client, post):
    d = post(client, "/api/learned_positions", {"run": "tiny", "positions": 5})
    assert d["positions"] == 5 and len(d["table"]) == 5 and len(d["cosine"][0]) == 5
    assert len(d["neighbours"][0]) == 3 and d["distant_cosine"] is None  # none 8 apart


def test_a_run_without_learned_positions_is_one_line(client, bad):
    bad(client, "/api/learned_positions", {"run": "llama"},
        "has rope positions, not a learned table: this needs a run trained with pos_encoding "
        "'learned'")
    bad(client, "/api/learned_positions", {"run": "tiny", "positions": 1}, "positions must be")
    bad(client, "/api/learned_positions", {"run": "tiny", "neighbours": 0}, "neighbours must")
