"""The FFN as key-value memories: the mechanics of every measure (what the hooks catch,
the value projection, trigger prefixes, the pattern score, composition), on GELU and
SwiGLU models; never what a trained model shows."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from gptlab import GPT, GPTConfig
from gptlab.errors import UsageError
from gptlab.interp import memory

PRESETS = ["tiny-gpt2", "tiny-llama"]  # GELU + LayerNorm, SwiGLU + RMSNorm


@pytest.fixture(params=PRESETS)
def model(request, preset_model, widen):
    """A tiny model of each FFN kind with widened weights (units fire clearly)."""
    m = preset_model(request.param, seed=3)
    widen(m, 3)
    return m


def text_ids(n: int = 90, vocab: int = 97, seed: int = 0) -> torch.Tensor:
    """n random token ids: longer than block_size (32), so several windows are read."""
    return torch.randint(vocab, (n,), generator=torch.Generator().manual_seed(seed))


def decode(ids) -> str:
    return "".join(chr(65 + i % 26) if i % 5 else " " for i in ids)


def direct_coefficients(model: GPT, idx: torch.Tensor, layer: int) -> torch.Tensor:
    """(T, H) float64: the FFN's coefficients recomputed from the layer's input (what
    norm_2 hands the FFN), with the weights in float64, not read from the hook."""
    block = model.blocks[layer]
    seen = []
    handle = block.mlp.register_forward_hook(lambda _m, args, _o: seen.append(args[0]))
    with torch.no_grad():
        model(idx[None])
    handle.remove()
    x, mlp = seen[0][0].double(), block.mlp

    def linear(lin):
        out = x @ lin.weight.double().T
        return out if lin.bias is None else out + lin.bias.double()

    if hasattr(mlp, "gate"):  # SwiGLU: the gate·up product
        return F.silu(linear(mlp.gate)) * linear(mlp.up)
    return F.gelu(linear(mlp.fc), approximate="tanh" if model.config.mlp == "gelu_tanh"
                  else "none")


def test_value_projection_is_the_direct_float64_matmul(model):
    for layer in range(model.config.n_layer):
        units = [0, 7, model.config.ffn_hidden - 1]
        got = memory.value_logits(model, layer, units)
        W_out = model.blocks[layer].mlp.proj.weight.double()
        gain = model.ln_f.weight.double()
        for row, unit in enumerate(units):
            want = model.lm_head.weight.double() @ (gain * W_out[:, unit])
            assert got.dtype == torch.float64
            assert torch.allclose(got[row], want, rtol=0, atol=1e-12)
    assert "weight" in memory.output_gain(model)[1]


def test_the_gain_is_what_the_final_norm_multiplies_by(model):
    # A non-trivial gain must change the projection: the gain is really applied.
    before = memory.value_logits(model, 0, [3])
    with torch.no_grad():
        model.ln_f.weight.mul_(torch.linspace(0.5, 2.0, model.config.n_embd))
    assert not torch.allclose(memory.value_logits(model, 0, [3]), before)


def test_a_post_norm_model_has_no_gain(preset_model):
    post = preset_model("tiny-gpt2", norm_position="post")
    gain, what = memory.output_gain(post)
    assert gain is None and what.startswith("none")
    want = post.lm_head.weight.double() @ post.blocks[1].mlp.proj.weight.double()[:, 5]
    assert torch.allclose(memory.value_logits(post, 1, [5])[0], want, rtol=0, atol=1e-12)


def test_hooked_coefficients_equal_the_direct_recomputation(model):
    idx = text_ids(30)
    coefficients, outputs = memory.ffn_pass(model, idx)
    for layer in range(model.config.n_layer):
        direct = direct_coefficients(model, idx, layer)
        assert torch.allclose(coefficients[layer, 0].double(), direct, atol=1e-5)
        proj = model.blocks[layer].mlp.proj
        assert torch.allclose(outputs[layer, 0], proj(coefficients[layer, 0]), atol=1e-5)


def test_captured_activation_equals_the_direct_recomputation_on_its_prefix(model):
    ids = text_ids()
    capture = memory.capture_ffn(model, ids)
    for position in (1, 20, 40, 60, 88):  # in the first, middle and last windows
        prefix = capture.prefix(position)
        assert 2 <= len(prefix) <= model.config.block_size
        assert torch.equal(prefix[-1], ids[position])
        for layer in range(model.config.n_layer):
            direct = direct_coefficients(model, prefix, layer)[-1]
            assert torch.allclose(capture.activations[layer, position].double(), direct,
                                  atol=1e-5)


def test_trigger_prefix_rerun_gives_the_recorded_activations(model):
    ids = text_ids()
    capture = memory.capture_ffn(model, ids)
    for layer in range(model.config.n_layer):
        for unit in (0, 11):
            for position in memory.top_triggers(capture, layer, unit, k=3).tolist():
                prefix = capture.prefix(position)
                rerun = memory.unit_activation(model, prefix, layer, unit)
                assert rerun == pytest.approx(float(capture.activations[layer, position, unit]),
                                              abs=1e-5)
                shortened = memory.unit_activation(model, prefix[:-1], layer, unit)
                assert shortened == pytest.approx(
                    float(capture.previous[layer, position, unit]), abs=1e-5)


def test_every_position_but_the_ends_is_taken_once_with_the_longest_context(model):
    capture = memory.capture_ffn(model, text_ids())
    taken = capture.candidates.nonzero()[:, 0].tolist()
    assert taken == list(range(1, 89))
    lengths = [len(capture.prefix(p)) for p in range(33, 89)]
    assert min(lengths) >= model.config.block_size // 2 + 1  # a half window at least


def test_top_triggers_are_ordered_and_beat_every_other_position(model):
    capture = memory.capture_ffn(model, text_ids())
    for layer in range(model.config.n_layer):
        for unit in (2, 5):
            positions = memory.top_triggers(capture, layer, unit, k=25)
            values = capture.activations[layer, positions, unit]
            assert len(positions) == 25 and len(set(positions.tolist())) == 25
            assert bool((values[:-1] >= values[1:]).all())
            assert bool(capture.candidates[positions].all())
            others = capture.candidates.clone()
            others[positions] = False
            assert bool((capture.activations[layer, others, unit] <= values[-1]).all())


def test_activation_drop_is_relative_and_nan_without_firing():
    capture = memory.FFNCapture(
        tokens=torch.arange(4), activations=torch.tensor([[[0.0], [2.0], [-1.0], [4.0]]]),
        previous=torch.tensor([[[0.0], [0.5], [3.0], [5.0]]]),
        outputs=torch.zeros(1, 4, 1), starts=torch.tensor([-1, 0, 0, 0]),
        candidates=torch.tensor([False, True, True, False]))
    drops = memory.activation_drops(capture, 0, 0, torch.tensor([1, 2, 3]))
    assert drops[0].item() == pytest.approx(0.75)
    assert drops[1].isnan()
    assert drops[2].item() == pytest.approx(-0.25)  # a rise is a negative drop


def test_pattern_score_on_hand_made_prefixes():
    # Three end in "ing" (the 4th ends "ng\n"); two end in the word "king": chars wins.
    prefixes = ["the king", "a ring", "singing", "O king\n", "xyz", "abc"]
    assert memory.pattern_score(prefixes, chars=3) == pytest.approx(3 / 6)
    # The word: "king" and "king\n" share their last word but not their last 3 chars.
    assert memory.pattern_score(["the king", "O king\n", "xyz"], chars=3) == pytest.approx(2 / 3)
    assert memory.pattern_score(["ab", "cb", "db", "ee"], chars=1) == pytest.approx(3 / 4)
    assert memory.pattern_score(["ab", "cd", "ef"], chars=2) == pytest.approx(1 / 3)
    assert memory.pattern_score(["same"] * 25) == 1.0
    assert memory.last_word("the ki") == "ki" and memory.last_word("  \n") == ""


def test_random_baseline_is_seeded_and_between_chance_and_one(model):
    capture = memory.capture_ffn(model, text_ids())
    a = memory.random_pattern_score(capture, decode, k=10, draws=20, seed=1)
    assert a == memory.random_pattern_score(capture, decode, k=10, draws=20, seed=1)
    assert 1 / 10 <= a <= 1.0


def test_composition_share_counts_positions_matching_no_strongest_unit(model):
    capture = memory.capture_ffn(model, text_ids())
    unit_top = memory.value_logits(model, 1).argmax(-1)
    for top_units in (1, 4):
        unmatched = 0
        positions = capture.candidates.nonzero()[:, 0].tolist()
        for p in positions:
            out = capture.outputs[1, p].double() * model.ln_f.weight.double()
            layer_top = int((model.lm_head.weight.double() @ out).argmax())
            strongest = capture.activations[1, p].topk(top_units).indices
            unmatched += layer_top not in unit_top[strongest].tolist()
        share = memory.composition_share(model, capture, 1, top_units)
        assert share == pytest.approx(unmatched / len(positions))
    every = memory.composition_share(model, capture, 1, model.config.ffn_hidden)
    assert every <= memory.composition_share(model, capture, 1, 1)


def test_records_can_be_recomputed_from_their_ids(model):
    ids = text_ids()
    result = memory.memory_measures(model, ids, decode, per_layer=3, k=5, draws=5)
    json.dumps(result)  # plain data
    assert [row["layer"] for row in result["layers"]] == list(range(model.config.n_layer))
    assert result["chance"] == 1 / model.config.vocab_size
    assert len(result["records"]) == 3 * model.config.n_layer
    for record in result["records"]:
        trigger = record["top_trigger"]
        assert trigger["text"] == decode(trigger["ids"])
        assert trigger["ids"][-1] == int(ids[trigger["position"]])
        assert record["next_token"]["id"] == int(ids[trigger["position"] + 1])
        layer, unit = record["layer"], record["unit"]
        assert record["value_top_token"]["id"] == int(
            memory.value_logits(model, layer, [unit])[0].argmax())
        rerun = memory.unit_activation(model, torch.tensor(trigger["ids"]), layer, unit)
        assert rerun == pytest.approx(record["activation"], abs=1e-5)
    for row in result["layers"]:
        mine = [r for r in result["records"] if r["layer"] == row["layer"]]
        agree = sum(r["value_top_token"]["id"] == r["next_token"]["id"] for r in mine)
        assert row["agreement"] == agree / 3


def test_shuffled_agreement_pairs_every_unit_with_every_other():
    def record(value, following):
        return {"value_top_token": {"id": value}, "next_token": {"id": following}}

    # values 1, 1, 2; next tokens 1, 2, 1: of the 6 ordered pairs (i != j), i's value
    # equals j's next token for (0,2), (1,0), (1,2), (2,1): 4 of 6.
    records = [record(1, 1), record(1, 2), record(2, 1)]
    assert memory.shuffled_agreement(records) == pytest.approx(4 / 6)
    assert memory.shuffled_agreement(records[:1]) is None


def test_sampled_units_are_distinct_and_seeded(model):
    a, b = memory.sample_units(model, 8, seed=4), memory.sample_units(model, 8, seed=4)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert all(len(set(x.tolist())) == 8 for x in a)


@pytest.mark.parametrize("call, name", [
    (lambda m, c: memory.value_logits(m, 2), "layer"),
    (lambda m, c: memory.value_logits(m, -1), "layer"),
    (lambda m, c: memory.value_logits(m, 0, [10_000]), "unit"),
    (lambda m, c: memory.value_logits(m, 0, [0.5]), "units"),
    (lambda m, c: memory.top_triggers(c, 0, 0, k=0), "k"),
    (lambda m, c: memory.top_triggers(c, 5, 0), "layer"),
    (lambda m, c: memory.top_triggers(c, 0, -1), "unit"),
    (lambda m, c: memory.pattern_score(["a"], chars=0), "chars"),
    (lambda m, c: memory.pattern_score([]), "prefix"),
    (lambda m, c: memory.composition_share(m, c, 0, top_units=0), "top_units"),
    (lambda m, c: memory.sample_units(m, 0), "per_layer"),
    (lambda m, c: memory.random_pattern_score(c, decode, draws=0), "draws"),
    (lambda m, c: memory.capture_ffn(m, [1, 2]), "text"),
    (lambda m, c: memory.unit_activation(m, torch.tensor([1.5]), 0, 0), "token ids"),
])
def test_bad_arguments_give_one_line_naming_the_parameter(preset_model, call, name):
    model = preset_model("tiny-gpt2")
    capture = memory.capture_ffn(model, text_ids(40))
    with pytest.raises(UsageError) as error:
        call(model, capture)
    message = str(error.value)
    assert name in message and "\n" not in message


def test_a_model_without_ffn_is_refused():
    model = GPT(GPTConfig.from_preset("tiny-gpt2", mlp="none"))
    with pytest.raises(UsageError, match="no feed-forward"):
        memory.capture_ffn(model, text_ids(40))
