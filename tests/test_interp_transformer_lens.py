"""capture_residuals, the logit lens, direct logit attribution and activation patching
against TransformerLens itself (the `test` extra pins transformer-lens 4.3.0), on the same
weights, offline, in float32:

- a random-init transformers GPT-2 with widened weights and biases, loaded by gptlab from
  its saved directory;
- a gptlab-trained bias-free GPT-2 exported with `gptlab convert --to-hf` and read back
  with gptlab.load.

TransformerLens wraps each with `TransformerBridge.boot_transformers(dir, hf_model=...)`.
Its raw bridge (the Hugging Face weights as they are) gives the hook points, the lens
(`accumulated_resid(apply_ln=True)` + `unembed`) and the patching sweeps
(`transformer_lens.patching`); direct logit attribution needs its HookedTransformer-style
weight processing (`enable_compatibility_mode`: the final norm folded into W_U, writing
weights and W_U centred), on which `stack_head_results`/`decompose_resid` +
`logit_attrs` give each part's share of a logit difference (a difference, because a
centred W_U shifts single logits by a per-position constant). Value biases are left
unfolded (fold_value_biases=False) so that a head's part keeps its own b_V @ W_O, as
ours does.
"""

from __future__ import annotations

import pytest
import torch
import transformers

from gptlab.cli.main import main
from gptlab.convert import hf
from gptlab.interp.attribution import logit_attribution
from gptlab.interp.lens import logit_lens
from gptlab.interp.patching import logit_difference, sweep
from gptlab.interp.residuals import capture_residuals
from gptlab.loading import load
from gptlab.training.run import train
from test_hf import random_hf_model
from test_train import make_data, tiny_model, tiny_train

transformer_lens = pytest.importorskip("transformer_lens")  # the `test` extra; see README
from transformer_lens import patching as tl_patching  # noqa: E402
from transformer_lens.model_bridge import TransformerBridge  # noqa: E402

ATOL = 1e-5
pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py
CLEAN = [1, 5, 7, 9, 3, 1, 5, 7, 9]
CORRUPT = [1, 5, 8, 9, 3, 1, 6, 7, 2]
TARGET, VERSUS = 5, 9


def _bridge(directory, processed: bool):
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        directory, attn_implementation="eager").eval()
    bridge = TransformerBridge.boot_transformers(str(directory), hf_model=theirs, device="cpu")
    if processed:
        bridge.enable_compatibility_mode(disable_warnings=True, fold_value_biases=False)
    return bridge


@pytest.fixture(scope="module", params=["random-gpt2-widened", "trained-bias-free-export"])
def pair(request, tmp_path_factory):
    """(name, our model, raw bridge, processed bridge) on the same weights."""
    root = tmp_path_factory.mktemp(request.param)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        if request.param == "random-gpt2-widened":
            random_hf_model("gpt2-tied-3heads").save_pretrained(root / "hf")
            ours = hf.from_hf(root / "hf").eval()
        else:
            data = make_data(root / "data", n_chars=5000)
            train(tiny_model(), tiny_train(max_iters=8), data, root / "run", progress=False)
            assert main(["convert", "--to-hf", str(root / "run"), "--out",
                             str(root / "hf")]) == 0
            ours, _ = load(root / "hf")
            # GPT-2's format always has biases: the bias-free run's come back as zeros.
            assert all(not p.any() for n, p in ours.named_parameters() if n.endswith("bias"))
        yield request.param, ours, _bridge(root / "hf", False), _bridge(root / "hf", True)
    finally:
        torch.set_num_threads(threads)


def tokens(ids):
    return torch.tensor([ids])


def worst(a, b) -> float:
    return (a.detach().float() - b.detach().float()).abs().max().item()


def test_every_hook_point_matches(pair):
    name, ours, raw, _ = pair
    _, cache = raw.run_with_cache(tokens(CLEAN))
    p = capture_residuals(ours, tokens(CLEAN))
    diffs = {"hook_embed": worst(cache["hook_embed"], p.embed),
             "hook_pos_embed": worst(cache["hook_pos_embed"], p.pos_embed)}
    for layer in range(ours.config.n_layer):
        ours_by_hook = {"hook_resid_pre": p.resid_pre[layer], "hook_resid_mid": p.resid_mid[layer],
                        "hook_resid_post": p.resid_post[layer],
                        "hook_attn_out": p.attn_out[layer], "hook_mlp_out": p.mlp_out[layer],
                        "attn.hook_z": p.head_outputs[layer].transpose(1, 2)}  # (B, T, nh, hs)
        for hook, mine in ours_by_hook.items():
            diffs[f"blocks.{layer}.{hook}"] = worst(cache[f"blocks.{layer}.{hook}"], mine)
    results = cache.stack_head_results(layer=-1)  # (n_layer * nh, B, T, C)
    diffs["stack_head_results"] = worst(results, torch.cat(
        [r.transpose(0, 1) for r in p.head_results]))
    print(name, "hook points: max |diff|", max(diffs.values()))
    assert max(diffs.values()) < ATOL, diffs
    assert p.final.abs().max() > 1.0 or name != "random-gpt2-widened"


def test_logit_lens_matches_accumulated_resid(pair):
    name, ours, raw, _ = pair
    _, cache = raw.run_with_cache(tokens(CLEAN))
    theirs = raw.unembed(cache.accumulated_resid(apply_ln=True))  # (n_layer + 1, B, T, V)
    mine = logit_lens(ours, tokens(CLEAN))
    diff = worst(theirs, mine)
    print(name, "logit lens: max |diff|", diff)
    assert theirs.shape == mine.shape and diff < ATOL


def test_direct_logit_attribution_matches_logit_attrs(pair):
    name, ours, _, processed = pair
    _, cache = processed.run_with_cache(tokens(CLEAN))
    heads = cache.stack_head_results(layer=-1, pos_slice=-1)
    their_heads = cache.logit_attrs(heads, tokens=TARGET, incorrect_tokens=VERSUS,
                                    pos_slice=-1)[:, 0]
    parts, labels = cache.decompose_resid(layer=-1, pos_slice=-1, return_labels=True)
    their_parts = dict(zip(labels, cache.logit_attrs(parts, tokens=TARGET, incorrect_tokens=VERSUS,
                                                     pos_slice=-1)[:, 0], strict=True))
    mine = logit_attribution(ours, tokens(CLEAN), TARGET, VERSUS)
    values = dict(zip(mine.labels, mine.values[:, 0], strict=True))
    n_layer, n_head = ours.config.n_layer, ours.config.n_head
    head_diff = worst(their_heads, torch.stack(
        [values[f"L{la}H{h}"] for la in range(n_layer) for h in range(n_head)]))
    mlp_diff = max(worst(their_parts[f"{la}_mlp_out"], values[f"L{la} mlp"])
                   for la in range(n_layer))
    embed_diff = max(worst(their_parts[k], values[k]) for k in ("embed", "pos_embed"))
    print(name, f"DLA: heads {head_diff:.1e}, MLPs {mlp_diff:.1e}, embeddings {embed_diff:.1e}")
    assert max(head_diff, mlp_diff, embed_diff) < ATOL
    assert (mine.values.sum(dim=0) - mine.total).abs().max() < ATOL


@pytest.mark.parametrize("kind, theirs", [
    ("resid", tl_patching.get_act_patch_resid_pre),
    ("mlp", tl_patching.get_act_patch_mlp_out),
    ("head", tl_patching.get_act_patch_attn_head_out_all_pos),
])
def test_patching_sweeps_match(pair, kind, theirs):
    name, ours, raw, _ = pair
    metric = logit_difference(TARGET, VERSUS)
    _, clean_cache = raw.run_with_cache(tokens(CLEAN))
    expected = theirs(raw, tokens(CORRUPT), clean_cache, metric)
    got = sweep(ours, tokens(CORRUPT), capture_residuals(ours, tokens(CLEAN)), kind, metric)
    diff = worst(expected, got)
    print(name, f"patching {kind}: max |diff| {diff:.1e} (range {got.min():.3f}..{got.max():.3f})")
    assert expected.shape == got.shape and diff < ATOL
    assert got.max() - got.min() > 1e-3  # the sweep moves the metric
