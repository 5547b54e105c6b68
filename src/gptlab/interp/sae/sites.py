"""Where a dictionary meets the model: reading a site's activations (`read_site`, the
forward stopped after the site's block, since nothing later is needed) and replacing them
while the model runs on (`spliced`): by the dictionary's reconstruction, or by zeros (the
"zero-ablated" baseline of CE loss recovered). Forward hooks on gptlab's own modules
(gptlab.interp.hooks), removed on exit:

  mlp_out     the output of blocks[L].mlp
  resid_post  the output of blocks[L]
  transcoder  reads the input of blocks[L].mlp (the normed stream of a pre-norm block),
              writes in place of its output
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
from torch import Tensor, nn

from gptlab.errors import UsageError
from gptlab.interp.hooks import check_tokens, eval_mode, forward_hooks
from gptlab.interp.memory import check_layer, ffn_modules
from gptlab.interp.sae.config import SITES
from gptlab.model.inputs import unwrap


class _Stop(Exception):
    """Raised by the hook after the site: the rest of the forward is not needed."""


def check_site(model: nn.Module, site: str, layer: int) -> None:
    """A UsageError where the model has no such site (an unknown name, a layer out of
    range, an FFN site in a model without FFNs)."""
    if site not in SITES:
        raise UsageError(f"site must be one of {', '.join(SITES)}, got {site!r}")
    check_layer(model, layer)
    if site != "resid_post":
        ffn_modules(model)


def _module(model: nn.Module, site: str, layer: int) -> nn.Module:
    block = unwrap(model).blocks[layer]
    return block if site == "resid_post" else block.mlp


@contextlib.contextmanager
def recording(model: nn.Module, site: str, layer: int,
              stop: bool = False) -> Iterator[dict[str, Tensor]]:
    """While inside, each forward leaves the site's "x" (what a dictionary reads, (B, T,
    d_in)) and "y" (what it rebuilds, (B, T, d_out)) in the dict yielded; stop: the
    forward ends there (raising _Stop, which the caller catches: read_site)."""
    check_site(model, site, layer)
    caught: dict[str, Tensor] = {}

    def hook(_module: nn.Module, args: tuple, out: Tensor) -> None:
        caught["x"] = args[0] if site == "transcoder" else out
        caught["y"] = out
        if stop:
            raise _Stop

    with forward_hooks((_module(model, site, layer), hook)):
        yield caught


@torch.no_grad()
def read_site(model: nn.Module, idx: Tensor, site: str, layer: int) -> tuple[Tensor, Tensor]:
    """(x (B, T, d_in), y (B, T, d_out)) at the site for idx (B, T): what a dictionary
    reads and what it must reconstruct (the same tensor but for a transcoder)."""
    idx = check_tokens(model, idx)
    with eval_mode(model), recording(model, site, layer, stop=True) as caught:
        try:
            model(idx)
        except _Stop:
            pass
    return caught["x"], caught["y"]


Replacement = Callable[[Tensor], Tensor]  # (B, T, d_in) -> (B, T, d_out)


@contextlib.contextmanager
def spliced(model: nn.Module, site: str, layer: int,
            replacement: Replacement | None) -> Iterator[None]:
    """While inside, the site's output is replacement(what the dictionary reads) (None:
    zeros, the ablation); the model is otherwise untouched."""
    check_site(model, site, layer)

    def hook(_module: nn.Module, args: tuple, out: Tensor) -> Tensor:
        if replacement is None:
            return torch.zeros_like(out)
        read = args[0] if site == "transcoder" else out
        return replacement(read).to(out.dtype)

    with forward_hooks((_module(model, site, layer), hook)):
        yield
