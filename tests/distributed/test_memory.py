"""Per-rank memory (gptlab.distributed.memory): the prediction for each sharded layout is
what the ranks of a torchrun launch hold, byte for byte (parallel_worker.py measures a
SwiGLU model with biases and RMSNorm, the other shapes tensor parallel cuts, after one
training step)."""

from __future__ import annotations

import json

import pytest

from gptlab.distributed.memory import per_rank_memory
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT

TOLERANCE = 1e-5


@pytest.mark.slow
def test_memory_prediction_matches_the_local_shards(parallel_runs):
    config = GPTConfig.from_dict({**GPTConfig.from_json(parallel_runs / "model.json").to_dict(),
                                  "vocab_size": 30, "mlp": "swiglu", "bias": True,
                                  "norm": "rmsnorm", "pos_encoding": "rope",
                                  "tie_embeddings": False})
    whole = per_rank_memory(config)
    assert whole.weights == 4 * sum(p.numel() for p in GPT(config).parameters())
    for rank in (0, 1):
        measured = json.loads((parallel_runs / f"bytes-{rank}.json").read_text())
        for item, m in measured.items():
            predicted = per_rank_memory(config, fsdp=m["dp"], tp=m["tp"])
            print(f"rank {rank} {item}: predicted {predicted.to_dict()}, measured {m}")
            assert m["loss_diff"] < TOLERANCE
            assert m["config_kept"], (rank, item)  # no config or n_head changed by sharding
            # each dimension this model has is even, so both ranks hold the same bytes
            assert (m["weights"], m["grads"], m["optimizer"]) == (
                predicted.weights, predicted.grads, predicted.optimizer), (rank, item)
            assert predicted.total < whole.total * 0.6  # and sharding saved memory
