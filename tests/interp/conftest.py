"""Shared by the interpretability tests: models of every pre-norm block kind with widened
weights, a two-layer model trained until it grows an induction circuit, and TransformerLens
wrapped around the same weights as gptlab (the oracle of residuals, lens, attribution and
patching)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from gptlab import GPT, GPTConfig
from gptlab.interp.heads import next_token_targets

# Bias and not, learned / sinusoidal / rotary positions, LayerNorm and RMSNorm, GELU and
# SwiGLU, grouped-query attention: every kind of pre-norm block gptlab builds.
KINDS = {
    "gpt2": dict(),
    "sinusoidal-bias-free": dict(pos_encoding="sinusoidal", bias=False),
    "llama-gqa": dict(pos_encoding="rope", norm="rmsnorm", mlp="swiglu", n_kv_head=2,
                      bias=False, tie_embeddings=False),
}
IDX = torch.tensor([[3, 14, 15, 92, 65, 35, 89, 79, 3, 14], [2, 71, 82, 81, 82, 84, 59, 4, 5, 2]])


@pytest.fixture(params=list(KINDS))
def kind(request) -> str:
    """Each of KINDS by name, in turn."""
    return request.param


@pytest.fixture(scope="session")
def widened(widen):
    """widened(kind, seed=0) -> tiny-gpt2 of that kind (KINDS) in eval mode, its weights
    widened: nothing hides under tiny values."""
    def make(kind: str, seed: int = 0) -> GPT:
        torch.manual_seed(seed)
        model = GPT(GPTConfig.from_preset("tiny-gpt2", **KINDS[kind])).eval()
        widen(model, seed)
        return model

    return make


@pytest.fixture
def idx() -> torch.Tensor:
    """Two sequences of 10 tokens, (2, 10)."""
    return IDX.clone()


@pytest.fixture(scope="session")
def preset_model():
    """preset_model(preset="tiny-gpt2", seed=0, **overrides) -> a fresh model in eval mode."""
    def make(preset: str = "tiny-gpt2", seed: int = 0, **overrides) -> GPT:
        torch.manual_seed(seed)
        return GPT(GPTConfig.from_preset(preset, **overrides)).eval()

    return make


# ----------------------------------------------------------------------------- induction

# Measured here (3 seeds; see the helper's report). Each training row is a random segment of
# distinct tokens, 8 to 24 long, repeated to the end of the row after a random-length prefix,
# so where a copy's next token sits is known only from content: a fixed look-back by
# position cannot predict it. The two-layer circuit forms in a phase change at steps
# 600-800 (seeds 0-2); afterwards both layer-1 heads are induction heads (0.37-0.42) and both
# layer-0 heads previous-token heads (0.27-0.44), which is why the composition check below
# ablates layer 0's previous-token heads together. About 25 s at one thread.
INDUCTION_TRAINING = dict(vocab=256, T=64, batch=32, n_embd=64, n_head=2, ffn_hidden=64,
                          pos="rope", lr=2e-3, warmup=50, steps=1000, seed=0,
                          segment=(8, 24))


def _induction_batch(generator, vocab, T, batch, segment):
    """(batch, T): per row, a random prefix shorter than the segment, then a segment of
    distinct random tokens (length in segment[0]..segment[1]) repeated until the row ends."""
    low, high = segment
    rows = []
    for _ in range(batch):
        L = int(torch.randint(low, high + 1, (1,), generator=generator))
        seg = torch.randperm(vocab, generator=generator)[:L]
        prefix = torch.randint(vocab, (int(torch.randint(L, (1,), generator=generator)),),
                               generator=generator)
        rows.append(torch.cat([prefix, seg.repeat(T // L + 1)])[:T])
    return torch.stack(rows)


@pytest.fixture(scope="session")
def induction_batch():
    """induction_batch(generator, vocab, T, batch, segment) -> (batch, T) training rows."""
    return _induction_batch


@pytest.fixture(scope="session")
def induction():
    """The two-layer model trained on INDUCTION_TRAINING's rows until the circuit forms
    (about 25 s at one thread): SimpleNamespace(model, half, settings). Read-only."""
    s = INDUCTION_TRAINING
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # fast for a model this small, and deterministic
    try:
        torch.manual_seed(s["seed"])
        model = GPT(GPTConfig(vocab_size=s["vocab"], block_size=s["T"], n_layer=2,
                              n_head=s["n_head"], n_embd=s["n_embd"],
                              ffn_hidden=s["ffn_hidden"], pos_encoding=s["pos"], bias=False))
        optimizer = torch.optim.AdamW(model.parameters(), lr=s["lr"], weight_decay=0.0)
        warmup = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: min(1.0, (step + 1) / s["warmup"]))
        generator = torch.Generator().manual_seed(s["seed"] + 1)
        for _ in range(s["steps"]):
            x = _induction_batch(generator, s["vocab"], s["T"], s["batch"], s["segment"])
            _, loss = model(x, next_token_targets(x))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            warmup.step()
    finally:
        torch.set_num_threads(threads)
    return SimpleNamespace(model=model.eval(), half=s["T"] // 2, settings=s)


@pytest.fixture(scope="session")
def circuit(induction):
    """The trained circuit on its probe (8 sequences of 32 random tokens, each repeated;
    seed 2): SimpleNamespace(model, half, clean (the tokens), scores (head_scores on them),
    head (the strongest layer-1 induction head))."""
    from gptlab.interp.heads import head_scores, repeated_random_tokens

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        clean = repeated_random_tokens(256, induction.half, 8, torch.Generator().manual_seed(2))
        scores = head_scores(induction.model, clean)
    finally:
        torch.set_num_threads(threads)
    return SimpleNamespace(model=induction.model, half=induction.half, clean=clean,
                           scores=scores, head=int(scores["induction"][1].argmax()))


# ----------------------------------------------------------------------------- TransformerLens

CLEAN = [1, 5, 7, 9, 3, 1, 5, 7, 9]
CORRUPT = [1, 5, 8, 9, 3, 1, 6, 7, 2]


def _bridge(directory, processed: bool):
    import transformers
    from transformer_lens.model_bridge import TransformerBridge

    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        directory, attn_implementation="eager").eval()
    bridge = TransformerBridge.boot_transformers(str(directory), hf_model=theirs, device="cpu")
    if processed:
        bridge.enable_compatibility_mode(disable_warnings=True, fold_value_biases=False)
    return bridge


@pytest.fixture(scope="session", params=["random-gpt2-widened", "trained-bias-free-export"])
def lens_pair(request, tmp_path_factory, random_hf_model, trained_run):
    """gptlab and TransformerLens (the `test` extra pins transformer-lens 4.3.0) on the same
    weights, offline, in float32, for two models:

    - a random-init transformers GPT-2 with widened weights and biases, loaded by gptlab from
      its saved directory;
    - a gptlab-trained bias-free GPT-2 (trained_run) exported with `gptlab convert --to-hf`
      and read back with gptlab.load.

    TransformerLens wraps each with `TransformerBridge.boot_transformers(dir, hf_model=...)`.
    Its raw bridge (the Hugging Face weights as they are) gives the hook points, the lens
    (`accumulated_resid(apply_ln=True)` + `unembed`) and the patching sweeps
    (`transformer_lens.patching`); direct logit attribution needs its HookedTransformer-style
    weight processing (`enable_compatibility_mode`: the final norm folded into W_U, writing
    weights and W_U centred), on which `stack_head_results`/`decompose_resid` + `logit_attrs`
    give each part's share of a logit difference (a difference, because a centred W_U
    shifts single logits by a per-position constant). Value biases are left unfolded
    (fold_value_biases=False) so that a head's part keeps its own b_V @ W_O, as ours does.

    SimpleNamespace(name, ours, raw, processed, clean, corrupt (token ids, (1, 9)), target,
    versus (token ids), worst(a, b): the largest absolute difference)."""
    pytest.importorskip("transformer_lens")  # the `test` extra; see README
    from gptlab.cli.main import main
    from gptlab.convert import hf
    from gptlab.loading import load

    root = tmp_path_factory.mktemp(request.param)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        if request.param == "random-gpt2-widened":
            random_hf_model("gpt2-tied-3heads").save_pretrained(root / "hf")
            ours = hf.from_hf(root / "hf").eval()
        else:
            assert main(["convert", "--to-hf", str(trained_run), "--out",
                         str(root / "hf")]) == 0
            ours, _ = load(root / "hf")
            # GPT-2's format always has biases: the bias-free run's come back as zeros.
            assert all(not p.any() for n, p in ours.named_parameters() if n.endswith("bias"))
        raw, processed = _bridge(root / "hf", False), _bridge(root / "hf", True)
    finally:
        torch.set_num_threads(threads)
    return SimpleNamespace(
        name=request.param, ours=ours, raw=raw, processed=processed,
        clean=torch.tensor([CLEAN]), corrupt=torch.tensor([CORRUPT]), target=5, versus=9,
        worst=lambda a, b: (a.detach().float() - b.detach().float()).abs().max().item())
