"""The chapter's model, one idea per module, in the order a reader meets them:

config (GPTConfig) and presets (named shapes, each citing its source); attention (scaled
dot-product attention and its teaching stages) and kv_cache; positional (sinusoidal,
learned, rotary) and rope_scaling (the long-context frequency rules); layers (feed-forward
networks and norms); block (pre- and post-norm); gpt (the whole model); decoding (sampling
a next token with the cache); params (parameters, FLOPs and memory from a config alone).

Nothing is imported here: `gptlab.model.config` and `presets` must load without torch, for
a CLI that answers at once.
"""
