"""The batches a run draws: random windows of a token array, each (B, T) with targets
shifted by one, from streams whose state is saved with every checkpoint so a resumed run
draws exactly what the uninterrupted run would have. Under DDP each rank draws its own rows
of the global batch.
"""

from __future__ import annotations

import numpy as np
import torch

from gptlab.distributed.process import Dist
from gptlab.errors import UsageError


def get_batch(
    tokens: np.ndarray,
    batch_size: int,
    block_size: int,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random contiguous windows on the CPU: x (B, T) int64 and y, the same windows
    shifted by one."""
    if len(tokens) <= block_size:
        raise UsageError(f"{len(tokens):,} tokens are too few for one block of {block_size:,}")
    offsets = torch.randint(len(tokens) - block_size, (batch_size,), generator=generator)
    # One fancy-indexing gather reads all windows from the memmap: (B, T + 1).
    index = offsets.numpy()[:, None] + np.arange(block_size + 1)
    windows = torch.from_numpy(np.asarray(tokens[index]).astype(np.int64))
    return windows[:, :-1], windows[:, 1:]


class TokenBatches:
    """Random windows of a token stream, the same draws whether 1 or N processes train.

    Every process holds the same generator and draws the offsets of the *global*
    micro-batch (batch_size x world_size windows); rank r keeps rows r*B..(r+1)*B. So the
    ranks see different windows, and N ranks x B reproduce 1 rank x N*B draw for draw.
    Training batches come from their own generator, seeded apart from the weights;
    evaluation batches from generators seeded by (seed, split, index): the same windows at
    every evaluation, independent of how far training has gone.
    """

    def __init__(self, train: np.ndarray, val: np.ndarray, batch_size: int, block_size: int,
                 seed: int, ctx: Dist) -> None:
        self.splits = {"train": train, "val": val}
        self.batch_size, self.block_size, self.seed, self.ctx = batch_size, block_size, seed, ctx
        self.generator = torch.Generator().manual_seed(derived_seed(seed, 0))

    def _draw(self, split: str, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        B, ctx = self.batch_size, self.ctx
        x, y = get_batch(self.splits[split], B * ctx.world_size, self.block_size, generator)
        rows = slice(ctx.rank * B, (ctx.rank + 1) * B)
        return to_device(x[rows], ctx.device), to_device(y[rows], ctx.device)  # (B, T) each

    def train_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self._draw("train", self.generator)

    def eval_batch(self, split: str, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        stream = 1 + 2 * index + (split == "val")
        return self._draw(split, torch.Generator().manual_seed(derived_seed(self.seed, stream)))

    def state(self) -> torch.Tensor:
        return self.generator.get_state()

    def load_state(self, state: torch.Tensor) -> None:
        self.generator.set_state(state)


class NanoGPTBatches(TokenBatches):
    """nanoGPT's batch stream: every draw from torch's global generator, continuing the
    stream that initialised the weights, and the next training batch drawn as soon as the
    last one is handed out (nanoGPT's prefetch), so its recipe retraces its run."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.generator = torch.default_generator
        self.pending = self._draw("train", self.generator)

    def train_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        batch, self.pending = self.pending, self._draw("train", self.generator)
        return batch

    def eval_batch(self, split: str, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self._draw(split, self.generator)

    def state(self) -> torch.Tensor:
        """The batch drawn ahead, (2, B, T); the generator is torch's own, which the
        trainer saves anyway."""
        return torch.stack(self.pending).cpu()

    def load_state(self, state: torch.Tensor) -> None:
        self.pending = (to_device(state[0], self.ctx.device), to_device(state[1], self.ctx.device))


BATCH_STREAMS = {"separate": TokenBatches, "nanogpt": NanoGPTBatches}


def derived_seed(seed: int, stream: int) -> int:
    """A seed for random stream number `stream` of a run. The weights are initialised from
    `seed` itself; the batches must not replay that same Mersenne Twister sequence, so each
    stream gets a seed scrambled by one step of Knuth's MMIX linear congruential generator."""
    return (((seed << 20) + stream) * 6364136223846793005 + 1442695040888963407) % 2**63


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CPU batch on `device`; on CUDA through pinned memory, so the copy overlaps the
    GPU's work."""
    t = t.contiguous()
    if device.type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)
