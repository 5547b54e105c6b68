"""Activations streamed from the model, never a corpus' worth held: step s reads
`windows` windows of `context` tokens at offsets drawn from a generator seeded by
(seed, s), so a step's batch is the same whenever it is read (a resumed run reads the
batches it would have), and each batch is the site's activations at every position of its
windows, (windows * context, d_in), computed then and dropped after the step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn

from gptlab.errors import UsageError
from gptlab.interp.sae.sites import read_site

# Mixes the step into the seed: distinct, stable, and unlike any seed a user would type.
_STEP_STRIDE = 1_000_003


def window_offsets(n_tokens: int, context: int, windows: int, seed: int, step: int) -> Tensor:
    """(windows,) start offsets in [0, n_tokens - context], drawn for `step`."""
    if n_tokens < context:
        raise UsageError(f"the text has {n_tokens:,} tokens, fewer than one window of "
                         f"{context:,}")
    generator = torch.Generator().manual_seed(seed * _STEP_STRIDE + step)
    return torch.randint(0, n_tokens - context + 1, (windows,), generator=generator)


def token_windows(tokens: np.ndarray | Tensor | Sequence[int], offsets: Tensor,
                  context: int) -> Tensor:
    """(windows, context) long ids starting at each offset."""
    rows = [torch.as_tensor(np.asarray(tokens[int(o): int(o) + context], dtype=np.int64))
            for o in offsets]
    return torch.stack(rows)


def batch(model: nn.Module, tokens: np.ndarray | Tensor, site: str, layer: int,
          context: int, windows: int, seed: int, step: int) -> tuple[Tensor, Tensor]:
    """(x (windows * context, d_in), y (windows * context, d_out)) float32 for `step`."""
    idx = token_windows(tokens, window_offsets(len(tokens), context, windows, seed, step),
                        context)
    x, y = read_site(model, idx, site, layer)
    return x.reshape(-1, x.shape[-1]).float(), y.reshape(-1, y.shape[-1]).float()
