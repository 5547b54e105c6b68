"""A run past its training length, for the longer-than-trained view (view 11): its loss by
position in non-overlapping windows of any context (RoPE stretched by a scaling if asked),
and one head's attention at a query position, which may be one the model never saw.

Its defaults work for any run, the shipped model on a fresh install included: the context
is twice the run's training length (its training length where positions are a learned
table, which has no row past it), and the text the experiment's eval.txt, else the embedded
Shakespeare's validation tenth (the part of the corpus the shipped model did not train on).
The numbers are the library's own (gptlab.inference.evaluate's score_positions, the
attention weights of gptlab.interp.hooks), as `gptlab eval --by-position` and `gptlab heads`
compute them.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import torch

from gptlab.data.corpus import shakespeare_text
from gptlab.data.text import split_text
from gptlab.data.tokenizer import encode_checked
from gptlab.errors import UsageError
from gptlab.experiments.context import EVAL_TEXT
from gptlab.experiments.context import NAME as CONTEXT_EXPERIMENT
from gptlab.experiments.grid import experiment_of
from gptlab.inference.evaluate import score_positions
from gptlab.interp.hooks import eval_mode, recording_attention
from gptlab.lab.context import schemas
from gptlab.lab.runs import Runs
from gptlab.loading import with_config
from gptlab.model.config import with_rope_scaling
from gptlab.model.positional import ContextWarning, check_context

MAX_SCORED = 4096  # tokens of text scored (the first ones)


def default_context(config) -> int:
    """Twice the training length, past what the model saw; a learned table has no row past
    its block_size, so there the training length itself."""
    if config.pos_encoding == "learned":
        return config.block_size
    return min(schemas.MAX_CONTEXT, 2 * config.block_size)


def context_view(runs: Runs, body: schemas.ContextRequest) -> dict[str, Any]:
    run = runs.load(body.run)
    config = run.model.config
    context = default_context(config) if body.context is None else body.context
    warning = check_context(config, context)  # learned positions refuse, by name
    if not (body.layer < config.n_layer and body.head < config.n_head):
        raise UsageError(f"layer {body.layer}, head {body.head}: the run has {config.n_layer} "
                         f"layers of {config.n_head} heads")
    position = context - 1 if body.position is None else body.position
    if position >= context:
        raise UsageError(f"position {position} is outside the window of {context}")
    text, source = _text_of(runs, body, run.tokenizer)
    ids = encode_checked(run.tokenizer, text, "the text", 10**9, min_tokens=2)[:MAX_SCORED]
    ids = torch.tensor(ids)
    if position >= len(ids):
        raise UsageError(f"position {position}: the text has only {len(ids)} tokens")
    spec = None
    if body.rope_scaling is not None:
        factor = max(1.0, context / config.block_size)
        spec = f"{body.rope_scaling}:{factor:g}"
    with runs.model_lock, torch.no_grad():
        model = run.model if spec is None else with_config(
            run.model, with_rope_scaling(config, spec))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ContextWarning)  # answered as `warning`
            scores = score_positions(model, ids, context=context, stride=context)
        window = ids[: position + 1][None]
        with eval_mode(model), recording_attention(model) as modules:
            model(window)
            row = modules[body.layer].weights[0, body.head, -1]
    decode = run.tokenizer.decode
    return {
        "run": run.name, "block_size": config.block_size, "pos_encoding": config.pos_encoding,
        "context": context, "rope_scaling": spec, "warning": warning, "source": source,
        "loss": scores.loss, "tokens_scored": sum(scores.scored),
        "buckets": scores.buckets(body.buckets),
        "attention": {"layer": body.layer, "head": body.head, "position": position,
                      "weights": [float(w) for w in row.double()],
                      "tokens": [decode([i]) for i in window[0].tolist()]},
    }


SHAKESPEARE_VAL = "the embedded Shakespeare's validation tenth"


@functools.lru_cache(maxsize=1)
def shakespeare_val() -> str:
    """The start of the embedded Shakespeare's validation split (its last tenth, as `gptlab
    prepare shakespeare` splits it): enough characters for MAX_SCORED tokens of any
    tokenizer that encodes it."""
    return split_text(shakespeare_text(), 0.1)[1][: 8 * MAX_SCORED]


def _text_of(runs: Runs, body: schemas.ContextRequest, tokenizer) -> tuple[str, str]:
    """The text to score: the request's; the eval.txt of the experiment the run is in; else
    the embedded Shakespeare's validation tenth, where the run's tokenizer encodes it."""
    if body.text:
        return body.text, "the text given"
    folder = runs.resolve(body.run).parent.parent  # EXPERIMENT/runs/NAME
    if experiment_of(folder) == CONTEXT_EXPERIMENT and (folder / EVAL_TEXT).is_file():
        return (folder / EVAL_TEXT).read_text(encoding="utf-8"), \
            f"{folder.relative_to(runs.root).as_posix()}/{EVAL_TEXT}"
    text = shakespeare_val()
    try:
        encode_checked(tokenizer, text, SHAKESPEARE_VAL, 10**9)
    except UsageError:
        raise UsageError(f"text is empty, the run is not one of a context experiment's and "
                         f"its vocabulary does not hold {SHAKESPEARE_VAL}: give a text to "
                         f"score") from None
    return text, SHAKESPEARE_VAL
