"""Activation patching (gptlab.interp.patching): patching everything restores the clean run
exactly, patching nothing changes nothing, each kind of site moves only what it should, the
sweeps are TransformerLens's, and on a trained induction circuit patching the previous-token
heads breaks the induction head."""

import pytest
import torch

from gptlab.errors import UsageError
from gptlab.interp.heads import chance_scores, head_scores, per_token_loss
from gptlab.interp.patching import Site, logit_difference, patched_logits, patching, sweep
from gptlab.interp.residuals import capture_residuals

CORRUPT = torch.tensor([[3, 14, 16, 92, 65, 35, 89, 70, 3, 14],
                        [2, 71, 82, 9, 82, 84, 59, 4, 6, 2]])


def test_patching_everything_restores_the_clean_logits_exactly(kind, one_thread, widened, idx):
    model = widened(kind)
    clean, corrupt = capture_residuals(model, idx), capture_residuals(model, CORRUPT)
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


def test_a_site_changes_only_what_follows_it(one_thread, widened, idx):
    model = widened("gpt2")
    clean = capture_residuals(model, idx)
    got = patched_logits(model, CORRUPT, clean, [Site("resid", 1, position=6)])
    corrupt = capture_residuals(model, CORRUPT).logits
    assert torch.equal(got[:, :6], corrupt[:, :6])  # causal: earlier positions untouched
    assert not torch.allclose(got[:, 6], corrupt[:, 6])
    # The last layer's MLP output at one position reaches only that position's logits.
    got = patched_logits(model, CORRUPT, clean, [Site("mlp", 1, position=3)])
    changed = (got != corrupt).any(dim=-1).any(dim=0)
    assert changed.tolist() == [t == 3 for t in range(10)]


def test_an_attention_site_is_every_heads_output_at_that_position(one_thread, widened, idx):
    model = widened("gpt2")
    clean = capture_residuals(model, idx)
    heads = [Site("head", 1, head=h, position=4) for h in range(model.config.n_head)]
    by_heads = patched_logits(model, CORRUPT, clean, heads)
    by_attn = patched_logits(model, CORRUPT, clean, [Site("attn", 1, position=4)])
    assert torch.allclose(by_attn, by_heads, atol=1e-5)
    assert not torch.allclose(by_attn, capture_residuals(model, CORRUPT).logits)


def test_sweeps_have_their_shapes_and_match_single_patches(one_thread, widened, idx):
    model = widened("gpt2")
    clean = capture_residuals(model, idx)
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
    (Site("embed", 0), "unknown site kind 'embed'"),
])
def test_bad_sites_are_one_clear_error(site, message, widened, idx):
    model = widened("gpt2")
    with pytest.raises(UsageError, match=message):
        patched_logits(model, CORRUPT, capture_residuals(model, idx), [site])


def test_inputs_of_different_lengths_are_refused(widened, idx):
    model = widened("gpt2")
    with pytest.raises(UsageError, match="same shape so positions line up"):
        patched_logits(model, CORRUPT[:, :9], capture_residuals(model, idx), [Site("resid", 0)])
    with pytest.raises(UsageError, match="unknown sweep"):
        sweep(model, CORRUPT, capture_residuals(model, idx), "everything", logit_difference(1))


# ----------------------------------------------------------------------------- TransformerLens

@pytest.mark.oracle
@pytest.mark.parametrize("site, theirs", [
    ("resid", "get_act_patch_resid_pre"),
    ("mlp", "get_act_patch_mlp_out"),
    ("head", "get_act_patch_attn_head_out_all_pos"),
])
def test_patching_sweeps_match_transformer_lens(lens_pair, site, theirs, one_thread):
    from transformer_lens import patching as tl_patching

    t = lens_pair
    metric = logit_difference(t.target, t.versus)
    _, clean_cache = t.raw.run_with_cache(t.clean)
    expected = getattr(tl_patching, theirs)(t.raw, t.corrupt, clean_cache, metric)
    got = sweep(t.ours, t.corrupt, capture_residuals(t.ours, t.clean), site, metric)
    diff = t.worst(expected, got)
    print(t.name, f"patching {site}: max |diff| {diff:.1e} "
          f"(range {got.min():.3f}..{got.max():.3f})")
    assert expected.shape == got.shape and diff < 1e-5
    assert got.max() - got.min() > 1e-3  # the sweep moves the metric


# ----------------------------------------------------------------------------- the circuit

@pytest.mark.slow
def test_patching_the_previous_token_heads_breaks_the_induction_head(circuit, one_thread):
    """On the trained circuit (Olsson et al. 2022). Measured on this probe for training seeds
    0 / 1 / 2: patching both layer-0 previous-token heads' outputs from a run on other random
    tokens into the clean run takes the induction score 0.40 / 0.37 / 0.35 -> 0.013 / 0.014 /
    0.018 (chance 0.014), the repeated half's loss 1.6 / 2.3 / 2.2 -> 6.9 / 6.8 / 6.4 nats;
    the strongest of them alone: 0.20 / 0.19 / 0.16."""
    model, half, clean, scores, head = (circuit.model, circuit.half, circuit.clean,
                                        circuit.scores, circuit.head)
    corrupt = torch.randint(256, clean.shape, generator=torch.Generator().manual_seed(5))
    source = capture_residuals(model, corrupt)
    prev = scores["previous_token"][0]
    prev_heads = [h for h in range(len(prev)) if prev[h] > 4 * chance_scores(clean)[
        "previous_token"]]
    clean_score = float(scores["induction"][1, head])
    clean_loss = float(per_token_loss(model, clean).mean(0)[half:].mean())
    with patching(model, source, [Site("head", 0, head=h) for h in prev_heads]):
        score = float(head_scores(model, clean)["induction"][1, head])
        loss = float(per_token_loss(model, clean).mean(0)[half:].mean())
    assert score < 0.05 and score < clean_score / 5, (prev_heads, score)  # <= 0.018
    assert loss > clean_loss + 3.0, (clean_loss, loss)  # measured: + 4.2 or more
    with patching(model, source, [Site("head", 0, head=int(prev.argmax()))]):
        score = float(head_scores(model, clean)["induction"][1, head])
    assert score < 0.65 * clean_score, score  # measured: 0.44-0.50 of the clean score
