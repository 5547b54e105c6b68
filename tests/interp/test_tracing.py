"""Causal tracing's mechanics on widened tiny models, whatever they compute: with nothing
corrupted every restored site gives the clean probability back; restoring the residual at
layer 0 at every position undoes the corruption exactly; a site before the subject
restores nothing; the noise has ROME's scale; positions get their kinds; bad input is
refused in one line. Never the outcome."""

from __future__ import annotations

import pytest
import torch

from gptlab.errors import UsageError
from gptlab.interp.patching import Site, patched_logits, target_probability
from gptlab.interp.residuals import capture_residuals
from gptlab.interp.tracing import (
    NOISE_SCALE,
    POSITION_KINDS,
    TRACE_KINDS,
    by_position_kind,
    embedding_std,
    noised_subject,
    position_kinds,
    subject_noise,
    trace,
    window_layers,
)

PROMPT = torch.tensor([3, 14, 15, 92, 65, 35, 89, 79, 3, 14])
SUBJECT = (2, 5)
TARGET = 7


def noise_for(model, samples=3, seed=0):
    std = embedding_std(model, PROMPT[SUBJECT[0]:SUBJECT[1]])
    return subject_noise(model, samples, SUBJECT[1] - SUBJECT[0], std,
                         torch.Generator().manual_seed(seed))


def test_with_nothing_corrupted_every_site_recovers_everything(kind, one_thread, widened):
    model = widened(kind)
    zeros = torch.zeros(2, SUBJECT[1] - SUBJECT[0], model.config.n_embd)
    traced = trace(model, PROMPT, SUBJECT, TARGET, zeros)
    assert traced.corrupted == pytest.approx(traced.clean, abs=1e-6)
    assert traced.total_effect == pytest.approx(0.0, abs=1e-6)
    for k in TRACE_KINDS:
        assert traced.restored[k].shape == (model.config.n_layer, len(PROMPT))
        assert torch.allclose(traced.restored[k], torch.tensor(traced.clean), atol=1e-6)


def test_restoring_the_whole_residual_at_layer_0_gives_the_clean_probability(kind, one_thread,
                                                                           widened):
    model = widened(kind)
    noise = noise_for(model)
    batch = PROMPT.expand(noise.shape[0], -1)
    clean = capture_residuals(model, batch)
    metric = target_probability(TARGET)
    with noised_subject(model, SUBJECT, noise), torch.no_grad():
        corrupted = float(metric(model(batch)[0]))
        restored = patched_logits(model, batch, clean, [Site("resid", 0, position=t)
                                                        for t in range(len(PROMPT))])
    assert corrupted != pytest.approx(float(metric(clean.logits)), abs=1e-4)  # noise bites
    assert torch.allclose(restored, clean.logits, atol=1e-5)
    assert float(metric(restored)) == pytest.approx(float(metric(clean.logits)), abs=1e-6)


def test_trace_matches_single_patches_and_sites_before_the_subject_restore_nothing(
        one_thread, widened):
    model = widened("gpt2")
    noise = noise_for(model, samples=2, seed=1)
    traced = trace(model, PROMPT, SUBJECT, TARGET, noise)
    batch = PROMPT.expand(2, -1)
    clean = capture_residuals(model, batch)
    metric = target_probability(TARGET)
    with noised_subject(model, SUBJECT, noise):
        for kind, layer, position in (("mlp", 1, 4), ("attn", 0, 9), ("resid", 1, 6),
                                      ("attn", 1, 0)):
            got = patched_logits(model, batch, clean, [Site(kind, layer, position=position)])
            assert float(traced.restored[kind][layer, position]) == pytest.approx(
                float(metric(got)), abs=1e-6)
    # Before the subject nothing differs between the runs: the indirect effect is zero.
    for kind in TRACE_KINDS:
        assert torch.equal(traced.indirect(kind)[:, :SUBJECT[0]],
                           torch.zeros(model.config.n_layer, SUBJECT[0]))


def test_the_same_noise_gives_the_same_trace_and_the_noise_has_romes_scale(one_thread,
                                                                           widened):
    model = widened("gpt2")
    a = trace(model, PROMPT, SUBJECT, TARGET, noise_for(model, seed=2))
    b = trace(model, PROMPT, SUBJECT, TARGET, noise_for(model, seed=2))
    assert (a.clean, a.corrupted) == (b.clean, b.corrupted)
    assert all(torch.equal(a.restored[k], b.restored[k]) for k in TRACE_KINDS)
    big = subject_noise(model, 64, 8, 0.5, torch.Generator().manual_seed(0))
    assert big.shape == (64, 8, model.config.n_embd)
    assert float(big.std()) == pytest.approx(NOISE_SCALE * 0.5, rel=0.05)


def test_a_window_restores_that_many_layers_inside_the_model():
    assert window_layers(0, 4, 1) == [0]
    assert window_layers(0, 4, 3) == [0, 1, 2]
    assert window_layers(2, 4, 3) == [1, 2, 3]
    assert window_layers(3, 4, 3) == [1, 2, 3]
    assert window_layers(1, 2, 10) == [0, 1]


def test_positions_get_their_kinds_and_means_are_taken_by_kind():
    kinds = position_kinds(7, (1, 4))
    assert kinds == ["before subject", "subject", "subject", "last subject", "after subject",
                     "after subject", "last"]
    assert position_kinds(3, (0, 3)) == ["subject", "subject", "last subject"]
    grid = torch.arange(14, dtype=torch.float).view(2, 7)
    means = by_position_kind(grid, kinds)
    assert set(means) == set(POSITION_KINDS)
    assert means["subject"] == [1.5, 8.5]
    assert means["last"] == [6.0, 13.0]
    assert by_position_kind(grid[:, :3], position_kinds(3, (0, 3)))["last"] is None


@pytest.mark.parametrize("call, message", [
    (lambda m: trace(m, PROMPT, (5, 5), TARGET, torch.zeros(1, 0, 32)), "subject"),
    (lambda m: trace(m, PROMPT, (2, 11), TARGET, torch.zeros(1, 9, 32)), "subject"),
    (lambda m: trace(m, PROMPT, SUBJECT, TARGET, torch.zeros(1, 2, 32)), "noise must be"),
    (lambda m: trace(m, PROMPT, SUBJECT, TARGET, torch.zeros(1, 3, 32), window=0), "window"),
    (lambda m: trace(m, PROMPT, SUBJECT, TARGET, torch.zeros(1, 3, 32), kinds=["head"]),
     "unknown trace kind"),
    (lambda m: trace(m, PROMPT.expand(2, -1), SUBJECT, TARGET, torch.zeros(1, 3, 32)),
     "one prompt"),
    (lambda m: subject_noise(m, 0, 3, 1.0, torch.Generator()), "at least one sample"),
])
def test_bad_input_is_refused_in_one_line(call, message, widened):
    model = widened("gpt2")
    assert model.config.n_embd == 32
    with pytest.raises(UsageError, match=message) as error:
        call(model)
    assert "\n" not in str(error.value)
