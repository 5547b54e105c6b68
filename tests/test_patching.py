"""Activation patching: patching everything restores the clean run exactly, patching
nothing changes nothing, and each kind of site moves only what it should."""

import pytest
import torch

from gptlab.errors import UsageError
from gptlab.interp.patching import Site, logit_difference, patched_logits, sweep
from gptlab.interp.residuals import capture_residuals
from test_residuals import IDX, KINDS, widened

CORRUPT = torch.tensor([[3, 14, 16, 92, 65, 35, 89, 70, 3, 14],
                        [2, 71, 82, 9, 82, 84, 59, 4, 6, 2]])


@pytest.mark.parametrize("kind", list(KINDS))
def test_patching_everything_restores_the_clean_logits_exactly(kind, one_thread):
    model = widened(kind)
    clean, corrupt = capture_residuals(model, IDX), capture_residuals(model, CORRUPT)
    assert not torch.allclose(clean.logits, corrupt.logits)
    for layer in range(model.config.n_layer):
        got = patched_logits(model, CORRUPT, clean, [Site("resid", layer)])
        assert torch.equal(got, clean.logits)
    # Every head and MLP of every layer (all positions) and the embeddings' effect is gone
    # only from the first block's input on: patch that too and the clean run is back.
    config = model.config
    everything = [Site("resid", 0)] + [Site("head", la, head=h) for la in range(config.n_layer)
                                       for h in range(config.n_head)] + [
        Site("mlp", la) for la in range(config.n_layer)]
    assert torch.equal(patched_logits(model, CORRUPT, clean, everything), clean.logits)
    # Patching a run with its own activations changes nothing.
    assert torch.equal(patched_logits(model, CORRUPT, corrupt, everything), corrupt.logits)


def test_a_site_changes_only_what_follows_it(one_thread):
    model = widened("gpt2")
    clean = capture_residuals(model, IDX)
    got = patched_logits(model, CORRUPT, clean, [Site("resid", 1, position=6)])
    corrupt = capture_residuals(model, CORRUPT).logits
    assert torch.equal(got[:, :6], corrupt[:, :6])  # causal: earlier positions untouched
    assert not torch.allclose(got[:, 6], corrupt[:, 6])
    # The last layer's MLP output at one position reaches only that position's logits.
    got = patched_logits(model, CORRUPT, clean, [Site("mlp", 1, position=3)])
    changed = (got != corrupt).any(dim=-1).any(dim=0)
    assert changed.tolist() == [t == 3 for t in range(10)]


def test_sweeps_have_their_shapes_and_match_single_patches(one_thread):
    model = widened("gpt2")
    clean = capture_residuals(model, IDX)
    metric = logit_difference(5, 9)
    grids = {kind: sweep(model, CORRUPT, clean, kind, metric) for kind in ("resid", "head", "mlp")}
    assert grids["resid"].shape == grids["mlp"].shape == (2, 10)
    assert grids["head"].shape == (2, 4)
    one = patched_logits(model, CORRUPT, clean, [Site("head", 1, head=2)])
    assert float(grids["head"][1, 2]) == pytest.approx(float(metric(one)), abs=1e-6)
    # The last position's stream carries the whole clean answer at the last layer's input.
    full = float(metric(clean.logits))
    assert float(grids["resid"][0, 9]) != pytest.approx(full, abs=1e-3)  # not from block 0
    restored = patched_logits(model, CORRUPT, clean, [Site("resid", 0, position=t)
                                                      for t in range(10)])
    assert float(metric(restored)) == full


@pytest.mark.parametrize("site, message", [
    (Site("resid", 2), "layer 2 is out of range: the model has layers 0..1"),
    (Site("resid", -1), "layer -1 is out of range"),
    (Site("head", 0, head=4), "head 4 is out of range"),
    (Site("head", 0), "head None is out of range"),
    (Site("mlp", 0, position=10), "position 10 is out of range for 10 tokens"),
    (Site("attn", 0), "unknown site kind 'attn'"),
])
def test_bad_sites_are_one_clear_error(site, message):
    model = widened("gpt2")
    with pytest.raises(UsageError, match=message):
        patched_logits(model, CORRUPT, capture_residuals(model, IDX), [site])


def test_inputs_of_different_lengths_are_refused():
    model = widened("gpt2")
    with pytest.raises(UsageError, match="same shape so positions line up"):
        patched_logits(model, CORRUPT[:, :9], capture_residuals(model, IDX), [Site("resid", 0)])
    with pytest.raises(UsageError, match="unknown sweep"):
        sweep(model, CORRUPT, capture_residuals(model, IDX), "everything", logit_difference(1))
