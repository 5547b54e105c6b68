"""The views that need no run: the attention calculator (view 1), why sqrt(d_k) (view 2), the
sinusoidal and RoPE positions (view 4), parameters (view 5) with the presets they start from,
and the quiz (view 7), all from the same arithmetic (compute)."""
