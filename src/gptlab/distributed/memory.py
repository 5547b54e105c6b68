"""Per-rank training memory under FSDP and tensor parallel, from a config alone.

The arithmetic follows what gptlab.distributed.parallelize does to each parameter, so a test can
compare it with the local shards of a real sharded model:
- tensor parallel over `tp` ranks divides q, k, v, the MLP's input projections (rows, and
  their biases) and the two output projections (columns) by tp; embeddings, norms,
  lm_head and the output projections' biases are whole on every rank;
- FSDP over `fsdp` ranks then cuts every (TP-local) tensor along its first dimension into
  fsdp chunks of ceil(rows / fsdp) rows, as torch.chunk does; rank 0 holds a full chunk,
  so it is the rank with the most (the figure given: per-rank memory is what must fit).
Bytes of fp32 weights, fp32 gradients and AdamW's two fp32 moments; activations, the
gathered (unsharded) copies FSDP makes for one block at a time, and the step counters are
left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gptlab.errors import UsageError
from gptlab.model.config import GPTConfig
from gptlab.model.params import parameter_shapes

BYTES_FP32 = 4


@dataclass(frozen=True)
class RankMemory:
    fsdp: int
    tp: int
    weights: int  # bytes on the rank holding the most
    grads: int
    optimizer: int  # AdamW exp_avg + exp_avg_sq

    @property
    def total(self) -> int:
        return self.weights + self.grads + self.optimizer

    def to_dict(self) -> dict[str, int]:
        return {"fsdp": self.fsdp, "tp": self.tp, "weights": self.weights,
                "grads": self.grads, "optimizer": self.optimizer, "total": self.total}


def per_rank_memory(config: GPTConfig, fsdp: int = 1, tp: int = 1) -> RankMemory:
    if fsdp < 1 or tp < 1:
        raise UsageError(f"fsdp and tp must be integers >= 1, got fsdp={fsdp}, tp={tp}")
    elements = 0
    for shape in parameter_shapes(config, tp):
        rows = min(math.ceil(shape[0] / fsdp), shape[0])
        elements += rows * math.prod(shape[1:])
    weights = elements * BYTES_FP32
    return RankMemory(fsdp, tp, weights, weights, 2 * weights)
