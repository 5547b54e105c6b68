"""The chapter quiz: questions made from the library, answers it computes and checks.

The numbers come from gptlab.lab.calculator.compute, the arithmetic the views show, and from
gptlab.model.params, so a question about a stage has the answer its view would give.

A question is fully determined by (kind, seed), so the server keeps no state: the page
sends back kind, seed and the learner's answer, and the server recomputes the answer.
"""

from __future__ import annotations

import math
import random
from typing import Any

from gptlab.errors import UsageError
from gptlab.lab.calculator import compute, schemas
from gptlab.model.config import GPTConfig
from gptlab.model.params import accounting

ROW0_CHOICES = {
    "mask": "The mask leaves row 0 only one key, itself; a softmax over one finite score "
            "is e^s / e^s = 1, whatever s is.",
    "norm": "W_Q is normalised so that the first query has unit length.",
    "largest": "The first token always has the largest score in its row.",
    "scale": "Dividing by sqrt(d_k) makes the first score exactly zero.",
}


def random_config(rng: random.Random) -> GPTConfig:
    n_head = rng.choice([1, 2, 4])
    return GPTConfig(
        vocab_size=rng.randrange(20, 300), block_size=rng.choice([16, 32, 64]),
        n_layer=rng.randrange(1, 5), n_head=n_head, n_embd=n_head * rng.choice([4, 8, 16]),
        bias=rng.random() < 0.5, tie_embeddings=rng.random() < 0.5, mlp="gelu",
    )


def _fmt(xs: list[float]) -> str:
    return ", ".join(f"{x:.2f}" for x in xs)


def _matrix(rows: list[list[float]]) -> str:
    """[[0.01, 1.20], [-0.35, 0.80]]: a matrix as a reader writes it."""
    return "[" + ", ".join(f"[{_fmt(r)}]" for r in rows) + "]"


def make(kind: str, seed: int) -> dict[str, Any]:
    """The question (without its answer) and, separately, what check() compares with."""
    rng = random.Random(f"{kind}:{seed}")
    if kind == "params":
        config = random_config(rng)
        acc = accounting(config)
        c = config
        question = (f"How many parameters has a GPT with vocab_size={c.vocab_size}, "
                    f"block_size={c.block_size}, n_layer={c.n_layer}, n_head={c.n_head}, "
                    f"n_embd={c.n_embd}, learned positions, LayerNorm, GELU MLP of 4*n_embd, "
                    f"bias={'yes' if c.bias else 'no'}, tied embeddings="
                    f"{'yes' if c.tie_embeddings else 'no'}?")
        worked = "; ".join(f"{r.name}: {r.params:,}" + (f" x {r.count}" if r.count > 1 else "")
                           for r in acc.rows) + f" -> total {acc.total:,}"
        return {"question": question, "format": "integer", "answer": acc.total,
                "worked": worked}
    if kind == "masked_row":
        tokens = rng.sample(["cat", "sat", "on", "the", "mat", "dog", "ran", "far"], 4)
        row = rng.randrange(1, 4)
        s = compute.attention(compute.seeded_inputs(tokens, 2, seed % 1000), causal=True)
        weights = s["weights"][row, : row + 1].tolist()
        q, k = s["q"], s["k"]
        quoted = " ".join(f'"{t}"' for t in tokens)
        question = (f"Tokens {quoted}, d_k = 2, causal mask. "
                    f"Q = {_matrix(q.tolist())}, K = {_matrix(k.tolist())}. "
                    f"What are the attention weights of row {row} (\"{tokens[row]}\") over the "
                    f"keys it may see? Give {row + 1} numbers, comma-separated, 2 decimals.")
        scores = s["scores"][row, : row + 1].tolist()
        worked = (f"scores q{row}.k_j / sqrt(2) = [{_fmt(scores)}]; keys after position {row} "
                  f"are -inf; softmax -> [{_fmt(weights)}] (sums to 1)")
        return {"question": question, "format": "list", "answer": weights, "tolerance": 0.01,
                "worked": worked}
    if kind == "row0":
        inputs = compute.seeded_inputs(["cat", "sat", "on", "the", "mat"], 4, seed % 1000)
        s = compute.attention(inputs, causal=True)
        unmasked = compute.attention(inputs, causal=False)["weights"][0].tolist()
        keys = list(ROW0_CHOICES)
        rng.shuffle(keys)
        row0 = s["weights"][0].tolist()
        worked = (f"With the mask, row 0 of the scores is [{s['scores'][0, 0].item():.2f}, -inf, "
                  f"-inf, -inf, -inf]; softmax gives [{_fmt(row0)}]. Without the mask it is "
                  f"[{_fmt(unmasked)}].")
        return {"question": "In the causal self-attention of \"cat sat on the mat\", why is "
                            "row 0 of the weights exactly [1.00, 0, 0, 0, 0]?",
                "format": "choice", "choices": [{"id": k, "text": ROW0_CHOICES[k]} for k in keys],
                "answer": "mask", "worked": worked}
    if kind == "rope_offset":
        r = compute.rope_scores(8, 10000.0, 16, seed % 1000)
        offset = rng.randrange(1, 6)
        m1, m2 = rng.sample(range(16 - offset), 2)
        given = r["scores"][m1, m1 + offset].item()
        answer = r["scores"][m2, m2 + offset].item()
        question = (f"RoPE (head_dim 8, base 10000). A query vector q at position {m1} and a key "
                    f"vector k at position {m1 + offset} score {given:.4f}. What do the same q "
                    f"and k score at positions {m2} and {m2 + offset}? Give it to 2 decimals "
                    f"(or more).")
        worked = (f"RoPE rotates q by m*theta and k by n*theta, so q_m.k_n = q.R((n-m)*theta)k "
                  f"depends only on n - m = {offset}: {answer:.4f}. (Unrotated, q.k = "
                  f"{(r['q'] @ r['k']).item():.4f}.)")
        # 2 decimals asked: any rounding of the answer to 2 or more decimals is right
        return {"question": question, "format": "number", "answer": answer,
                "tolerance": 0.005 + 1e-9, "decimals": 2, "worked": worked}
    if kind == "sqrt_dk":
        d_k = rng.choice([16, 64, 256, 1024])
        stats = compute.scaling_stats(d_k, n_keys=16, seed=seed % 1000)
        question = (f"q and k have d_k = {d_k} independent N(0, 1) entries. Without dividing "
                    f"by sqrt(d_k), what is the standard deviation of the score q.k?")
        worked = (f"q.k is a sum of {d_k} products, each of mean 0 and variance 1, so its "
                  f"variance is {d_k} and its std sqrt({d_k}) = {math.sqrt(d_k):g} "
                  f"(measured: {stats['std_raw']:.2f}). Unscaled, the softmax over "
                  f"{stats['n_keys']} keys puts {stats['unscaled']['max_weight']:.2f} on its top "
                  f"key on average (entropy {stats['unscaled']['entropy']:.2f} nats); scaled, "
                  f"{stats['scaled']['max_weight']:.2f} (entropy "
                  f"{stats['scaled']['entropy']:.2f} of at most {stats['max_entropy']:.2f}).")
        return {"question": question, "format": "number", "answer": math.sqrt(d_k),
                "tolerance": 0.02 * math.sqrt(d_k), "worked": worked}
    raise UsageError(f"unknown quiz kind {kind!r}; expected one of: "
                     f"{', '.join(schemas.QUIZ_KINDS)}")


def _kind_and_seed(body: schemas.QuizRequest) -> tuple[str, int]:
    kinds = schemas.QUIZ_KINDS
    return body.kind or kinds[body.seed % len(kinds)], body.seed


def question_view(body: schemas.QuizRequest) -> dict[str, Any]:
    kind, seed = _kind_and_seed(body)
    q = make(kind, seed)
    return {"kind": kind, "seed": seed, "question": q["question"], "format": q["format"],
            "choices": q.get("choices")}


def _parse(answer: str | float, fmt: str) -> Any:
    """The answer (a string of at most 500 characters or a finite number, as the model
    checked) in the question's format."""
    if fmt == "choice":
        if not isinstance(answer, str):
            raise UsageError("answer must be one of the choices' ids")
        return answer
    if not isinstance(answer, str):
        answer = str(answer)
    try:
        if fmt == "list":
            return [float(x) for x in answer.replace(";", ",").split(",") if x.strip()]
        value = float(answer.replace(",", "").replace("_", "").strip())
    except ValueError:
        raise UsageError(f"answer {answer!r} is not a number"
                         + (" list" if fmt == "list" else "")) from None
    if not math.isfinite(value):
        raise UsageError("answer must be a finite number")
    return value


def check_view(body: schemas.QuizCheckRequest) -> dict[str, Any]:
    kind, seed = _kind_and_seed(body)
    q = make(kind, seed)
    given = _parse(body.answer, q["format"])
    expected = q["answer"]
    if q["format"] == "list":
        correct = len(given) == len(expected) and all(
            abs(a - b) <= q["tolerance"] for a, b in zip(given, expected, strict=True))
    elif q["format"] == "integer":
        correct = given == expected
    elif q["format"] == "number":
        correct = abs(given - expected) <= q["tolerance"]
    else:
        correct = given == expected
    return {"kind": kind, "seed": seed, "correct": bool(correct), "expected": expected,
            "expected_text": _shown(q), "worked": q["worked"]}


def _shown(q: dict[str, Any]) -> str:
    """A question's answer as the learner reads it: a choice's text (not its id), a list
    or a number to the precision the question asks for."""
    answer = q["answer"]
    if q["format"] == "choice":
        return next(c["text"] for c in q["choices"] if c["id"] == answer)
    if q["format"] == "list":
        return _fmt(answer)
    if q["format"] == "integer":
        return f"{answer:,}"
    if "decimals" in q:  # the rounding asked for, then the number itself
        return f"{answer:.{q['decimals']}f} ({answer:.4f})"
    return f"{answer:.4f}"


