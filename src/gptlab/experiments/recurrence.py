"""`gptlab experiment recurrence`: one step against n steps, and the O(n^2) price.

The chapter: in an RNN information at position 1 travels n steps to reach position n,
decaying on the way; in self-attention any two positions are one step apart; the price is
O(n^2). Three parts:

- **Gradient against distance.** Per seed, a gptlab transformer (an ordinary run under
  OUT/runs, trained by gptlab.experiments.grid) and an LSTM of about its parameter count
  (gptlab.experiments.lstm: torch.nn.LSTM, not a gptlab model, so not a run; its weights in
  OUT/lstm/ as safetensors) are trained on the same text with the same batches, steps and
  learning-rate schedule. On fixed held-out windows, the norm of the gradient of the loss at
  the last position with respect to the input embedding k positions back, for every k.
- **Associative recall** (MQAR, gptlab.experiments.mqar; Arora et al. 2023): a 2-layer
  attention model and an LSTM at two widths, trained on generated rows of 64, 128 and 256
  tokens (pairs growing with the length, as Zoology's), accuracy on held-out rows. These
  train on the generated task with the loss on the answers only, which a run's loss on
  every position cannot do: they are trained here, their weights in OUT/mqar/.
- **The price.** Untrained models of the text models' shapes at batch 1: the seconds of a
  forward and backward pass and the bytes autograd keeps, against n; the seconds to decode
  a token with gptlab's KV cache and without (gptlab.experiments.price); beside the FLOPs
  per token of gptlab.model.params.accounting and Kaplan et al.'s 2N + 2 L n_ctx d.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from gptlab.data.batches import derived_seed, get_batch
from gptlab.data.prepared import load_data
from gptlab.experiments import price, report
from gptlab.experiments.baselines import text_baselines
from gptlab.experiments.claims import Claim, Measured, Precondition
from gptlab.experiments.contract import Experiment
from gptlab.experiments.grid import Grid, RunRecord, RunSpec, choose_size, open_experiment
from gptlab.experiments.lstm import (
    LSTMModel,
    cached,
    distance_gradients,
    gpt_logits,
    gpt_loss,
    lstm_logits,
    lstm_loss,
    lstm_parameters,
    matching_hidden,
    train_model,
)
from gptlab.experiments.mqar import accuracy, mqar_batch, pairs_for
from gptlab.experiments.units import by_seed, measured_over, per_unit, seed_list
from gptlab.loading import load
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.model.params import accounting
from gptlab.plots.experiments import line_panels
from gptlab.training.config import recipe

NAME = "recurrence"
RECIPE = "shakespeare-char-cpu-fast"
TITLE = "One step against n steps, and the O(n^2) price"
FIGURE = "recurrence.png"
FIGURES = (FIGURE,)
PROBE_SEED = 12345  # the held-out windows and MQAR's evaluation rows never change with --seed
LSTM_DIR, MQAR_DIR = "lstm", "mqar"


@dataclass(frozen=True)
class Size:
    name: str
    model: dict[str, Any]  # the text transformer's GPTConfig fields (vocab from the data)
    steps: int
    batch_size: int
    seeds: int
    probe_rows: int  # held-out windows the gradients average over
    mqar_lengths: tuple[int, ...]
    mqar_widths: tuple[int, ...]
    mqar_symbols: int  # keys, and as many values
    mqar_steps: int
    mqar_tokens: int  # tokens per MQAR batch (rows = this / length)
    mqar_eval_rows: int
    price_lengths: tuple[int, ...]
    price_repeats: int
    decode_tokens: int
    learning_rate: float = 3e-3
    mqar_learning_rate: float = 3e-3
    warmup: int = 30
    eval_iters: int = 4


SIZES = {
    # 2 layers x 4 heads, width 64, block 64 against an LSTM of the same parameter count,
    # three seeds (the verdicts need a spread); MQAR as Zoology's lengths at widths 32 and
    # 64; the price from 64 to 2048 tokens, past the n_ctx = 12 d = 768 where the context
    # term of the FLOPs overtakes the parameters'.
    "default": Size("default", dict(n_layer=2, n_head=4, n_embd=64, block_size=64,
                                    dropout=0.0, bias=False, pos_encoding="rope"),
                    steps=300, batch_size=32, seeds=3, probe_rows=32,
                    mqar_lengths=(64, 128, 256), mqar_widths=(32, 64), mqar_symbols=16,
                    mqar_steps=1000, mqar_tokens=1024, mqar_eval_rows=64,
                    price_lengths=(64, 128, 256, 512, 1024, 2048), price_repeats=3,
                    decode_tokens=8),
    "quick": Size("quick", dict(n_layer=2, n_head=2, n_embd=16, block_size=16, dropout=0.0,
                                bias=False, pos_encoding="rope"),
                  steps=6, batch_size=4, seeds=2, probe_rows=2, mqar_lengths=(16, 32),
                  mqar_widths=(8, 16), mqar_symbols=4, mqar_steps=3, mqar_tokens=64,
                  mqar_eval_rows=4, price_lengths=(8, 16), price_repeats=2, decode_tokens=3,
                  warmup=2, eval_iters=1),
}


def run_recurrence(out: str | Path, data: str | Path | None = None, quick: bool = False,
                   seed: int = 1337, steps: int | None = None, progress: bool = False,
                   log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train (or reuse) the seeds' transformers (runs) and LSTMs in `out` on the text
    (--data, or the embedded Shakespeare), measure the gradients by distance, train and
    score the MQAR models, time the price; write results.json, report.md and the figure.
    steps: the text models' training steps (MQAR keeps its size's)."""
    size = choose_size(SIZES, quick, steps=steps)
    timer = report.Timer()
    folder, data_dir = open_experiment(out, NAME, data, log)
    tokens = load_data(data_dir)
    grid = Grid(folder, data_dir)
    records = grid.train(specs(size, seed, tokens.vocab_size), progress, log)
    timer.add("train_s", sum(r.train_s for r in records.values() if not r.reused))
    text = {}
    for name, record in records.items():
        t0 = time.perf_counter()
        pair = text[record.seed] = text_pair(folder, grid.run_dir(name), record, size, tokens,
                                             log)
        lstm_s = 0.0 if pair["lstm"]["reused"] else pair["lstm"]["train_s"]
        timer.add("lstm_s", lstm_s)
        timer.add("measure_s", time.perf_counter() - t0 - lstm_s)
    t0 = time.perf_counter()
    recall = mqar(folder / MQAR_DIR, size, seed, log)
    timer.add("mqar_s", time.perf_counter() - t0)
    t0 = time.perf_counter()
    shape = next(iter(text.values()))
    costs = price_of(size, tokens.vocab_size, shape["lstm"]["hidden"])
    timer.add("price_s", time.perf_counter() - t0)
    results = {
        "experiment": NAME, "size": size.name, "model": size.model, "recipe": RECIPE,
        "steps": size.steps, "batch_size": size.batch_size,
        "learning_rate": size.learning_rate, "probe": {"seed": PROBE_SEED,
                                                       "rows": size.probe_rows},
        "baselines": text_baselines(tokens.train, tokens.vocab_size),
        "text": {str(s): v for s, v in sorted(text.items())}, "mqar": recall,
        "price": costs, "records": {name: r.to_dict(folder) for name, r in records.items()},
    }
    drawing = time.perf_counter()
    figure(results).save(folder / FIGURE)
    timer.add("report_s", time.perf_counter() - drawing)
    return report.finish(folder, results, records, timer, TITLE,
                         lambda written: sections(written, records), CLAIMS)


def specs(size: Size, seed: int, vocab_size: int) -> list[RunSpec]:
    """A transformer run per seed, attention-seed-S, one evaluation at the end."""
    model = GPTConfig(vocab_size=vocab_size, **size.model)
    lr = size.learning_rate
    return [RunSpec(f"attention-seed-{s}", model,
                    recipe(RECIPE, seed=s, max_iters=size.steps, lr_decay_iters=size.steps,
                           eval_interval=size.steps, batch_size=size.batch_size,
                           learning_rate=lr, min_lr=lr / 10, warmup_iters=size.warmup,
                           eval_iters=size.eval_iters, log_interval=max(1, size.steps // 10),
                           whole_val=False, dtype="float32"))
            for s in seed_list(seed, size.seeds)]


def text_batches(tokens: Any, size: Size, seed: int) -> Iterator[tuple[Tensor, Tensor]]:
    """The training windows a run of `seed` draws (gptlab.data.batches: the same generator
    seed, the same windows in the same order, one process)."""
    generator = torch.Generator().manual_seed(derived_seed(seed, 0))
    while True:
        yield get_batch(tokens.train, size.batch_size, size.model["block_size"], generator)


def held_out(tokens: Any, size: Size, rows: int, stream: int) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(derived_seed(PROBE_SEED, stream))
    return get_batch(tokens.val, rows, size.model["block_size"], generator)


def text_pair(folder: Path, run_dir: Path, record: RunRecord, size: Size, tokens: Any,
              log: Callable[[str], None]) -> dict[str, Any]:
    """One seed: the run's transformer, the LSTM trained beside it, their held-out losses
    and their gradients by distance (mean over the probe rows, index k = k back)."""
    gpt, _ = load(run_dir)
    gpt.eval()
    n_params = gpt.num_parameters()
    embed = size.model["n_embd"]
    hidden = matching_hidden(n_params, tokens.vocab_size, embed)
    spec = {"vocab_size": tokens.vocab_size, "embed": embed, "hidden": hidden,
            "steps": size.steps, "batch_size": size.batch_size, "block": size.model["block_size"],
            "lr": size.learning_rate, "warmup": size.warmup, "seed": record.seed,
            "data": tokens.fingerprint()}

    def make() -> LSTMModel:
        torch.manual_seed(record.seed)
        return LSTMModel(tokens.vocab_size, embed, hidden)

    def train(model: torch.nn.Module) -> dict[str, Any]:
        log(f"lstm-seed-{record.seed}: training {size.steps} steps (hidden {hidden})")
        losses = train_model(model, lstm_loss, text_batches(tokens, size, record.seed),
                             size.steps, size.learning_rate, size.warmup)
        return {"final_train_loss": losses[-1]}

    lstm, trained = cached(folder / LSTM_DIR, f"lstm-seed-{record.seed}", spec, make, train)
    x, y = held_out(tokens, size, size.probe_rows, 1)
    last = x.shape[1] - 1
    with torch.no_grad():
        losses = {"attention": float(gpt_loss(gpt, x, y)), "lstm": float(lstm_loss(lstm, x, y))}
    grads = {"attention": distance_gradients(gpt_logits(gpt), gpt.wte(x), y, last),
             "lstm": distance_gradients(lstm_logits(lstm), lstm.embedding(x), y, last)}
    return {"seed": record.seed,
            "attention": {"parameters": n_params, "val_loss": losses["attention"],
                          "gradient": grads["attention"].mean(0).tolist()},
            "lstm": {"parameters": lstm_parameters(tokens.vocab_size, embed, hidden),
                     "embed": embed, "hidden": hidden, "val_loss": losses["lstm"],
                     "gradient": grads["lstm"].mean(0).tolist(), "file":
                     f"{LSTM_DIR}/lstm-seed-{record.seed}.safetensors", **trained}}


# ----------------------------------------------------------------------------- MQAR


def mqar_models(width: int, length: int, vocab: int) -> dict[str, Callable[[], Any]]:
    """The two contenders at one width: gptlab's GPT with 2 layers (heads of 16, learned
    positions, its MLP, untied head) and a 1-layer LSTM whose embedding and state are the
    width; both with PyTorch's default initialization (mqar_attention)."""
    return {"attention": lambda: mqar_attention(width, length, vocab),
            "lstm": lambda: LSTMModel(vocab, width, width)}


def mqar_attention(width: int, length: int, vocab: int) -> GPT:
    """The MQAR attention model, initialized as PyTorch initializes the LSTMModel beside it
    (embeddings N(0, 1), linear layers nn.Linear's uniform) rather than GPT-2's N(0, 0.02):
    from GPT-2's small start attention stayed on the plateau of guessing among a row's
    values for 5,000 steps at 64 tokens, with every learning rate, position encoding and
    head count tried; from PyTorch's it recalls at 64 tokens within 1,000 (a guess, not
    measured: the induction circuit forms faster from larger position and token signals)."""
    model = GPT(GPTConfig(vocab_size=vocab, n_layer=2, n_head=max(1, width // 16),
                          n_embd=width, block_size=length, dropout=0.0, bias=False,
                          pos_encoding="learned", tie_embeddings=False))
    for module in model.modules():
        if isinstance(module, torch.nn.Embedding):
            torch.nn.init.normal_(module.weight)
        elif isinstance(module, torch.nn.Linear) and module is not model.lm_head:
            module.reset_parameters()
    return model


def mqar(folder: Path, size: Size, seed: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Every (length, width, model): trained on seeded batches (the same for both models),
    scored on PROBE_SEED's held-out rows; cached in folder."""
    symbols, cells = size.mqar_symbols, []
    vocab = 2 * symbols
    for length in size.mqar_lengths:
        pairs = pairs_for(length)
        rows = max(1, size.mqar_tokens // length)
        x_eval, y_eval = mqar_batch(size.mqar_eval_rows, length, pairs, symbols, symbols,
                                    torch.Generator().manual_seed(PROBE_SEED))
        for width in size.mqar_widths:
            for kind, make in mqar_models(width, length, vocab).items():
                name = f"{kind}-w{width}-n{length}"
                spec = {"kind": kind, "width": width, "length": length, "pairs": pairs,
                        "symbols": symbols, "rows": rows, "steps": size.mqar_steps,
                        "lr": size.mqar_learning_rate, "seed": seed}

                def built(make: Callable[[], Any] = make) -> Any:
                    torch.manual_seed(seed)
                    return make()

                def train(model: Any, kind: str = kind, name: str = name, length: int = length,
                          pairs: int = pairs, rows: int = rows) -> dict[str, Any]:
                    log(f"mqar {name}: training {size.mqar_steps} steps")
                    generator = torch.Generator().manual_seed(seed)
                    batches = iter(lambda: mqar_batch(rows, length, pairs, symbols, symbols,
                                                      generator), None)
                    losses = train_model(model, gpt_loss if kind == "attention" else lstm_loss,
                                         batches, size.mqar_steps, size.mqar_learning_rate,
                                         size.warmup)
                    return {"final_train_loss": losses[-1]}

                model, record = cached(folder, name, spec, built, train)
                with torch.no_grad():
                    logits = model(x_eval)[0] if kind == "attention" else model(x_eval)
                cells.append({"model": kind, "width": width, "length": length, "pairs": pairs,
                              "parameters": sum(p.numel() for p in model.parameters()),
                              "accuracy": accuracy(logits, y_eval), **record})
    return {"symbols": symbols, "chance": 1 / symbols, "seed": seed,
            "steps": size.mqar_steps, "tokens_per_batch": size.mqar_tokens,
            "eval_rows": size.mqar_eval_rows, "cells": cells}


# ----------------------------------------------------------------------------- the price


def price_of(size: Size, vocab_size: int, hidden: int) -> dict[str, Any]:
    """Untrained models of the text shapes (the transformer's block raised to the longest
    n): per n, forward + backward seconds (each repeat) and saved bytes of both, and the
    attention model's decode seconds per token with and without the cache; FLOPs per token
    beside them."""
    longest = max(size.price_lengths)
    config = GPTConfig(vocab_size=vocab_size, **{**size.model, "block_size": longest})
    torch.manual_seed(PROBE_SEED)
    gpt, lstm = GPT(config), LSTMModel(vocab_size, size.model["n_embd"], hidden)
    generator = torch.Generator().manual_seed(PROBE_SEED)
    text = torch.randint(vocab_size, (1, longest), generator=generator)
    rows = []
    for n in size.price_lengths:
        idx = text[:, :n]
        steps = {"attention": price.train_step(gpt, lambda i: gpt(i)[0], idx),
                 "lstm": price.train_step(lstm, lstm, idx)}
        row: dict[str, Any] = {"n": n}
        for kind, step in steps.items():
            row[kind] = {"train_s": price.seconds_of(step, size.price_repeats),
                         "saved_bytes": price.saved_bytes(
                             (lambda i=idx: gpt(i)[0]) if kind == "attention"
                             else (lambda i=idx: lstm(i)))}
        gpt.eval()
        prompt = idx[:, : n - size.decode_tokens]
        row["decode"] = {"cached_s": price.decode_seconds_cached(gpt, prompt,
                                                                 size.decode_tokens),
                         "uncached_s": price.decode_seconds_uncached(gpt, idx,
                                                                     size.price_repeats)}
        gpt.train()
        acc = accounting(config, seq_len=n)
        row["flops"] = {"forward_per_token": acc.flops_forward_per_token,
                        "parameter_term": 2 * acc.n_matmul,
                        "attention_term": acc.flops_attention_per_token,
                        "kaplan_context_term": 2 * config.n_layer * n * config.n_embd}
        rows.append(row)
    acc = accounting(config)
    blocks = config.n_layer * (acc.per_block)
    return {"attention_parameters": gpt.num_parameters(),
            "lstm_parameters": sum(p.numel() for p in lstm.parameters()),
            "lstm_step_s": price.lstm_step_seconds(lstm.eval(), size.price_repeats),
            "n_matmul": acc.n_matmul, "non_embedding": blocks,
            # Kaplan et al.: 2N = 2 L n_ctx d where n_ctx = N / (L d); 12 d for N = 12 L d^2
            "kaplan_crossover": blocks / (config.n_layer * config.n_embd),
            "twelve_d": 12 * config.n_embd,
            # gptlab's accounting counts QK^T and AV in full (4 L n d): 2 N_matmul = 4 L n d
            "gptlab_crossover": acc.n_matmul / (2 * config.n_layer * config.n_embd),
            "repeats": size.price_repeats, "decode_tokens": size.decode_tokens, "rows": rows}


# ----------------------------------------------------------------------------- claims


def far_band(gradient: list[float]) -> list[float]:
    """The farther half of the distances (k from half the window to its start)."""
    return gradient[len(gradient) // 2:]


def decay(gradient: list[float]) -> float:
    """log10 of the mean gradient norm over the far band against the norm at k = 1 (one
    position back): 0 flat, -1 ten times smaller far away."""
    far = far_band(gradient)
    return math.log10((sum(far) / len(far)) / gradient[1])


def _text_runs(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The text claims' units: each seed's transformer and LSTM, in seed order."""
    return by_seed(results["text"].values())


def _cell(results: dict[str, Any], model: str, width: int, length: int) -> dict[str, Any]:
    return report.find(results["mqar"]["cells"], model=model, width=width, length=length)


def _per_length(value: Callable[[dict[str, Any], int], float],
                shown: str) -> Callable[..., Measured]:
    """MQAR trains one seed per cell: its claims take the lengths as the units the spread is
    over (as the memory experiment takes text slices)."""
    def measured(results: dict[str, Any]) -> Measured:
        lengths = sorted({c["length"] for c in results["mqar"]["cells"]})
        effects = [value(results, n) for n in lengths]
        return Measured(lengths, effects, shown.format(", ".join(
            f"n={n}: {e:+.2f}" for n, e in zip(lengths, effects, strict=True))),
            unit="lengths")
    return measured


def _least_recall(results: dict[str, Any]) -> float:
    """The widest attention model's lowest MQAR accuracy over the lengths."""
    lengths = {c["length"] for c in results["mqar"]["cells"]}
    return min(_cell(results, "attention", _widest(results), n)["accuracy"] for n in lengths)


def _widest(results: dict[str, Any]) -> int:
    return max(c["width"] for c in results["mqar"]["cells"])


def _narrowest(results: dict[str, Any]) -> int:
    return min(c["width"] for c in results["mqar"]["cells"])


def _per_repeat(value: Callable[[dict[str, Any], int], float],
                shown: str) -> Callable[..., Measured]:
    """Timing claims: each repeat of the timings is one unit of the spread."""
    def measured(results: dict[str, Any]) -> Measured:
        costs = results["price"]
        return per_unit(range(costs["repeats"]), lambda r: value(costs, r), shown,
                        name=lambda r: r, unit="repeats", digits="+.2f")
    return measured


def _growth(kind: str) -> Callable[[dict[str, Any], int], float]:
    """log2 of the time's growth over the last doubling of n (1: linear, 2: quadratic)."""
    def growth(costs: dict[str, Any], r: int) -> float:
        a, b = costs["rows"][-2], costs["rows"][-1]
        return math.log2(b[kind]["train_s"][r] / a[kind]["train_s"][r]) / math.log2(b["n"] / a["n"])
    return growth


def _cache_gain(costs: dict[str, Any], r: int) -> float:
    """log10 of uncached over cached seconds per token at the longest n."""
    row = costs["rows"][-1]
    cached_s = statistics.median(row["decode"]["cached_s"])
    return math.log10(row["decode"]["uncached_s"][r] / cached_s)


# Thresholds, each with why:
# - "decays": a tenth (one decade) of the near gradient left in the far half of the window,
#   a change no seed-to-seed noise of a trained model's gradients reaches by itself;
# - "one step apart": attention keeps at least half a decade (about 3x) more of its far
#   gradient than the LSTM does;
# - MQAR "solves": 90% of the answers (Zoology's attention reaches ~100%; chance here is
#   1/symbols); "beats" and "width helps": 0.1 of accuracy, well above the 1/eval-answers
#   granularity;
# - the preconditions: the gradients are read off models that read their context (a
#   held-out loss under the bigram table's, which the current token alone gets); the MQAR
#   claims need the widest attention model to have learned recall at every length
#   (LEARNED: half the answers; guessing among a row's values scores at most about 1/3 at
#   the fewest pairs, 4): where it has not, the training budget decided the accuracies,
#   not what attention or a fixed-size state can do, the LSTM's included;
# - timing: attention's time grows by at least 2^0.2 more per doubling than the LSTM's
#   (exponent 0.2), and the cache saves at least a factor of 2 (0.3 decades) per token.
DECADE, HALF_DECADE, SOLVED, GAP, LEARNED = 1.0, 0.5, 0.9, 0.1, 0.5


def reads_context(*kinds: str) -> Precondition:
    """Every seed's models of those kinds (attention, lstm) read their context."""
    names = " and ".join("LSTM" if k == "lstm" else k for k in kinds)
    return Precondition(
        f"every seed's {names} model{'s' if len(kinds) > 1 else ''} read"
        f"{'' if len(kinds) > 1 else 's'} the text's context", "highest held-out loss",
        lambda r: max(run[k]["val_loss"] for run in r["text"].values() for k in kinds),
        lambda r: r["baselines"]["bigram"], below=True, why="a bigram table's loss")


RECALLS = Precondition(
    "the widest attention model learned recall at every length", "lowest accuracy",
    _least_recall, lambda r: LEARNED, why="half the answers")
CLAIMS = (
    Claim("rnn_decays",
          "in an RNN the signal from far back decays on its n steps",
          "the chapter (Ch. 5); Bengio et al. 1994, Hochreiter 1991: vanishing gradients",
          "LSTM: log10(mean gradient norm, far half of the window / one position back)",
          measured_over(_text_runs, lambda r: decay(r["lstm"]["gradient"]),
                        "LSTM decay (decades): {}", digits="+.2f"),
          direction=-1, smallest=DECADE, precondition=reads_context("lstm")),
    Claim("attention_one_step",
          "in self-attention any two positions are one step apart",
          "the chapter: a path of length 1 between any two positions (Vaswani et al. 2017)",
          "attention's decay minus the LSTM's, decades (attention keeps more far gradient)",
          measured_over(_text_runs,
                        lambda r: decay(r["attention"]["gradient"]) - decay(r["lstm"]["gradient"]),
                        "attention decay - LSTM decay: {}", digits="+.2f"),
          direction=1, smallest=HALF_DECADE, precondition=reads_context("attention", "lstm")),
    Claim("attention_solves_mqar",
          "attention solves associative recall at width 64 at every length",
          "Zoology (Arora et al. 2023): attention solves MQAR at width 64, lengths 64-512",
          "the widest attention model's MQAR accuracy minus 0.9, per length",
          _per_length(lambda res, n: _cell(res, "attention", _widest(res), n)["accuracy"]
                      - SOLVED, "accuracy - 0.9: {}"),
          direction=1, smallest=0.0, precondition=RECALLS),
    Claim("attention_beats_lstm_mqar",
          "attention recalls better than a fixed-size state at the same width",
          "Zoology: fixed-state models fall behind attention as pairs grow; Jelassi et al. "
          "2024: transformers learn to copy from about 100x fewer examples",
          "attention's MQAR accuracy minus the LSTM's, widest width, per length",
          _per_length(lambda res, n: _cell(res, "attention", _widest(res), n)["accuracy"]
                      - _cell(res, "lstm", _widest(res), n)["accuracy"],
                      "attention - LSTM: {}"),
          direction=1, smallest=GAP, precondition=RECALLS),
    Claim("lstm_needs_width",
          "a fixed-size state needs more width to recall more",
          "Zoology: the width fixed-state models need grows with the number of pairs",
          "the LSTM's MQAR accuracy, widest minus narrowest width, per length",
          _per_length(lambda res, n: _cell(res, "lstm", _widest(res), n)["accuracy"]
                      - _cell(res, "lstm", _narrowest(res), n)["accuracy"],
                      "wide - narrow: {}"),
          direction=1, smallest=GAP, precondition=RECALLS),
    Claim("quadratic_price",
          "attention pays O(n^2): its cost grows faster with n than the RNN's",
          "2N + 2 L n_ctx d FLOPs per token (Kaplan et al. 2020): the context term passes "
          "the parameters' near n_ctx = 12 d",
          "growth exponent of forward+backward time over the last doubling of n, attention "
          "minus LSTM, per timing repeat",
          _per_repeat(lambda c, r: _growth("attention")(c, r) - _growth("lstm")(c, r),
                      "exponent difference: {}"),
          direction=1, smallest=0.2),
    Claim("kv_cache",
          "the KV cache makes a decoded token cost one position's work, not the text's",
          "the chapter's KV cache; without it each token reruns the whole text",
          "log10(uncached / cached seconds per token) at the longest n, per repeat",
          _per_repeat(_cache_gain, "decades saved: {}"),
          direction=1, smallest=math.log10(2)),
)


# ----------------------------------------------------------------------------- writing


def _ms(seconds: list[float] | float) -> str:
    value = statistics.median(seconds) if isinstance(seconds, list) else seconds
    return f"{value * 1e3:.1f}"


def text_table(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["seed", "model", "parameters", "held-out loss", "gradient k=1",
              "far half (mean)", "k = window start", "decay (decades)"]
    rows = []
    for r in results["text"].values():
        for kind in ("attention", "lstm"):
            g = r[kind]["gradient"]
            far = far_band(g)
            label = "attention" if kind == "attention" else f"LSTM (hidden {r['lstm']['hidden']})"
            rows.append([str(r["seed"]), label, f"{r[kind]['parameters']:,}",
                         f"{r[kind]['val_loss']:.3f}", f"{g[1]:.3g}",
                         f"{sum(far) / len(far):.3g}", f"{g[-1]:.3g}", f"{decay(g):+.2f}"])
    return header, rows


def mqar_table(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    cells = results["mqar"]["cells"]
    lengths = sorted({c["length"] for c in cells})
    header = ["model", "width", "parameters", *[f"n={n} ({report.find(cells, length=n)['pairs']}"
                                                f" pairs)" for n in lengths]]
    rows = []
    for kind in ("attention", "lstm"):
        for width in sorted({c["width"] for c in cells}):
            mine = [report.find(cells, model=kind, width=width, length=n) for n in lengths]
            rows.append([kind, str(width), f"{mine[0]['parameters']:,}",
                         *[f"{c['accuracy']:.3f}" for c in mine]])
    return header, rows


def price_table(results: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["n", "attention fwd+bwd ms", "LSTM fwd+bwd ms", "attention saved MiB",
              "LSTM saved MiB", "decode ms/token: cache", "no cache", "FLOPs/token 2N",
              "attention term (gptlab)", "2 L n d (Kaplan)"]
    rows = []
    for r in results["price"]["rows"]:
        f = r["flops"]
        rows.append([str(r["n"]), _ms(r["attention"]["train_s"]), _ms(r["lstm"]["train_s"]),
                     f"{r['attention']['saved_bytes'] / 2**20:.2f}",
                     f"{r['lstm']['saved_bytes'] / 2**20:.2f}", _ms(r["decode"]["cached_s"]),
                     _ms(r["decode"]["uncached_s"]), f"{f['parameter_term']:,}",
                     f"{f['attention_term']:,}", f"{f['kaplan_context_term']:,}"])
    return header, rows


def tables(results: dict[str, Any]) -> list[tuple[str, tuple[list[str], list[list[str]]]]]:
    """The tables the command prints and the lab shows."""
    return [("gradient of the last position's loss by the input embedding k back (held-out "
             "windows):", text_table(results)),
            ("MQAR accuracy on held-out rows (chance 1/symbols):", mqar_table(results)),
            ("the price at batch 1 (untrained models of the text shapes; each repeat the "
             "fastest of 5 calls, the median of the repeats shown):", price_table(results))]


def notes(results: dict[str, Any]) -> list[str]:
    p = results["price"]
    return [f"FLOPs: the context term passes the parameter term near n_ctx = "
            f"{p['kaplan_crossover']:.0f} by Kaplan's 2 L n d (12 d = {p['twelve_d']}) and "
            f"{p['gptlab_crossover']:.0f} by gptlab's accounting (4 L n d, lm_head counted)",
            f"LSTM decoding step: {_ms(p['lstm_step_s'])} ms at any length (its state is all "
            f"it carries)",
            "the LSTMs and the MQAR models are not gptlab runs (torch.nn.LSTM; MQAR's loss is "
            "on the answers only): their weights are safetensors files in OUT/lstm and "
            "OUT/mqar"]


def figure(results: dict[str, Any]) -> Any:
    first = next(iter(results["text"].values()))
    cells, rows = results["mqar"]["cells"], results["price"]["rows"]
    mqar_lines = {f"{kind} w{w}": [(c["length"], c["accuracy"]) for c in cells
                                   if c["model"] == kind and c["width"] == w]
                  for kind in ("attention", "lstm") for w in sorted({c["width"] for c in cells})}
    return line_panels([
        {"title": f"gradient by distance (seed {first['seed']})", "xlabel": "k (positions back)",
         "ylabel": "|d loss_t / d x_(t-k)|", "log_y": True,
         "lines": {kind: list(enumerate(first[kind]["gradient"])) for kind in ("attention",
                                                                              "lstm")}},
        {"title": "MQAR accuracy", "xlabel": "sequence length", "ylabel": "accuracy",
         "log_x": True, "lines": mqar_lines},
        {"title": "forward + backward, batch 1", "xlabel": "n", "ylabel": "ms", "log_x": True,
         "log_y": True, "lines": {kind: [(r["n"], statistics.median(r[kind]["train_s"]) * 1e3)
                                         for r in rows] for kind in ("attention", "lstm")}},
        {"title": "decoding one token", "xlabel": "n", "ylabel": "ms", "log_x": True,
         "log_y": True,
         "lines": {"KV cache": [(r["n"], statistics.median(r["decode"]["cached_s"]) * 1e3)
                                for r in rows],
                   "no cache": [(r["n"], statistics.median(r["decode"]["uncached_s"]) * 1e3)
                                for r in rows]}},
    ], title="one step against n steps, and the price")


def sections(results: dict[str, Any], records: dict[str, RunRecord]) -> list[tuple[str, str]]:
    m, first = results["model"], next(iter(results["text"].values()))
    mq, p = results["mqar"], results["price"]
    setup = (f"Size `{results['size']}`: a transformer of {m['n_layer']} layers x "
             f"{m['n_head']} heads, width {m['n_embd']}, block {m['block_size']} "
             f"({first['attention']['parameters']:,} parameters; runs under OUT/runs) and an "
             f"LSTM of hidden {first['lstm']['hidden']} ({first['lstm']['parameters']:,} "
             f"parameters; not a gptlab run, weights in OUT/lstm), each trained "
             f"{results['steps']} steps of batch {results['batch_size']} on the same windows "
             f"at learning rate {results['learning_rate']:g}; {report.seeds_line(records)}. "
             f"Gradients on {results['probe']['rows']} held-out windows (seed "
             f"{results['probe']['seed']}). MQAR: {mq['symbols']} keys and {mq['symbols']} "
             f"values, {mq['steps']} steps of {mq['tokens_per_batch']} tokens, seed "
             f"{mq['seed']}, {mq['eval_rows']} held-out rows per length. The price: "
             f"{p['repeats']} repeats per n, {p['decode_tokens']} decoded tokens.")
    out = [("Setup", setup), *report.table_sections(tables(results))]
    out.append(("Notes", "\n".join(f"- {line}" for line in notes(results))))
    out += report.closing(results, FIGURE)
    return out


EXPERIMENT = Experiment(name=NAME, title=TITLE, figures=FIGURES, sizes=SIZES,
                        units=("seeds", "lengths", "repeats"), run=run_recurrence,
                        tables=tables, notes=notes, claims=CLAIMS)
