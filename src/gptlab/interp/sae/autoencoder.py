"""The sparse dictionary itself: x -> features f (d_sae, mostly zero) -> reconstruction.

    f = act(W_enc^T (x - b_dec) + b_enc)        SAE (x - b_dec: SAELens' apply_b_dec_to_input)
    f = act(W_enc^T x + b_enc)                  transcoder (b_dec is the output's bias)
    x_hat = W_dec^T f + b_dec

act is ReLU ("standard") or TopK: the k largest pre-activations kept (ReLU'd), the rest
zero. Weights are stored as SAELens stores them: W_enc (d_in, d_sae), b_enc (d_sae,),
W_dec (d_sae, d_out), b_dec (d_out,). Each row of W_dec (a feature's direction, the
"decoder column" of the papers, which write W_dec as (d_out, d_sae)) has norm 1, so a
feature's activation is the length of what it writes.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gptlab.interp.sae.config import SAEConfig


class SparseAutoencoder(nn.Module):
    """A sparse autoencoder or transcoder (config.site says which); see the module doc."""

    def __init__(self, config: SAEConfig, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.config = config
        d_in, d_sae, d_out = config.d_in, config.d_sae, config.d_out
        # SAELens' initialisation: random unit decoder rows, the encoder their transpose
        # (when d_in == d_out), the biases zero.
        decoder = torch.randn(d_sae, d_out, generator=generator)
        self.W_dec = nn.Parameter(decoder / decoder.norm(dim=1, keepdim=True))
        encoder = (self.W_dec.detach().T.clone() if d_in == d_out
                   else torch.randn(d_in, d_sae, generator=generator) / d_in ** 0.5)
        self.W_enc = nn.Parameter(encoder)
        self.b_enc = nn.Parameter(torch.zeros(d_sae))
        self.b_dec = nn.Parameter(torch.zeros(d_out))

    def pre_activations(self, x: Tensor) -> Tensor:
        """(..., d_in) -> (..., d_sae): what the activation function is applied to."""
        if not self.config.transcoder:
            x = x - self.b_dec
        return x @ self.W_enc + self.b_enc

    def activate(self, pre: Tensor) -> Tensor:
        if self.config.activation == "standard":
            return torch.relu(pre)
        values, indices = pre.topk(self.config.k, dim=-1)
        return torch.zeros_like(pre).scatter(-1, indices, values.relu())

    def encode(self, x: Tensor) -> Tensor:
        """(..., d_in) -> (..., d_sae) feature activations, >= 0."""
        return self.activate(self.pre_activations(x))

    def decode(self, features: Tensor) -> Tensor:
        """(..., d_sae) -> (..., d_out)."""
        return features @ self.W_dec + self.b_dec

    def forward(self, x: Tensor) -> Tensor:
        return self.decode(self.encode(x))

    @torch.no_grad()
    def normalize_decoder(self) -> None:
        """Every decoder row back to norm 1 (after an optimizer step moved it)."""
        self.W_dec.div_(self.W_dec.norm(dim=1, keepdim=True).clamp_min(1e-12))

    @torch.no_grad()
    def remove_parallel_gradient(self) -> None:
        """Drop the part of W_dec's gradient along each row (Bricken et al.): with the rows
        held at norm 1, only movement on the sphere is kept, so Adam's step is not spent
        on a length that normalize_decoder would undo."""
        if self.W_dec.grad is None:
            return
        along = (self.W_dec.grad * self.W_dec).sum(dim=1, keepdim=True)
        self.W_dec.grad -= along * self.W_dec

    @torch.no_grad()
    def fold_scales(self, scale_in: float, scale_out: float) -> None:
        """Make a dictionary trained on (x * scale_in -> y * scale_out) one that reads raw
        x and writes raw y, its decoder rows kept at norm 1: the features are divided by
        scale_out (ReLU and TopK commute with a positive scale), so
        W_enc *= scale_in / scale_out, b_enc /= scale_out, b_dec /= scale_out (an SAE has
        scale_in == scale_out)."""
        self.W_enc.mul_(scale_in / scale_out)
        self.b_enc.div_(scale_out)
        self.b_dec.div_(scale_out)

    @classmethod
    def identity(cls, config: SAEConfig) -> SparseAutoencoder:
        """A standard dictionary that reconstructs exactly, for checking a splice: the
        features are +x and -x along each input axis (d_sae = 2 d_in), so ReLU keeps one
        of each pair and W_dec puts it back."""
        if config.d_sae != 2 * config.d_in or config.d_out != config.d_in:
            raise ValueError("an identity dictionary has d_sae = 2 d_in = 2 d_out")
        if config.activation == "topk" and config.k < config.d_in:
            raise ValueError("an identity TopK dictionary keeps k >= d_in features")
        sae = cls(config)
        eye = torch.eye(config.d_in)
        with torch.no_grad():
            sae.W_enc.copy_(torch.cat([eye, -eye], dim=1))
            sae.W_dec.copy_(torch.cat([eye, -eye], dim=0))
            sae.b_enc.zero_()
            sae.b_dec.zero_()
        return sae
