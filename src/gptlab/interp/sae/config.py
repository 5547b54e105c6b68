"""What a sparse dictionary is (`SAEConfig`) and how one is trained (`TrainSettings`), as
plain data under SAELens' names, so that a saved dictionary's cfg.json reads as SAELens'
does (d_in, d_sae, architecture, k, apply_b_dec_to_input, normalize_activations, metadata
with hook_name) and its training settings as SAELens' runner's (l1_coefficient,
aux_loss_coefficient, dead_feature_window, feature_sampling_window,
train_batch_size_tokens, training_tokens, lr, context_size).

A site is where a dictionary reads the model, named as TransformerLens names its hook
points (the names SAELens records):

  mlp_out      blocks.L.hook_mlp_out        the FFN's output, (B, T, n_embd)
  resid_post   blocks.L.hook_resid_post     the stream after block L, (B, T, n_embd)
  transcoder   blocks.L.ln2.hook_normalized -> blocks.L.hook_mlp_out: the FFN's input (the
               normed stream) in, its output out (Dunefsky et al. 2024)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from gptlab.errors import UsageError

SITES = ("mlp_out", "resid_post", "transcoder")
# "standard": ReLU and an L1 penalty, dead features resampled (Bricken et al. 2023);
# "topk": the k largest pre-activations kept, the auxiliary loss for dead ones (Gao et al.
# 2024), no L1.
ACTIVATIONS = ("standard", "topk")


def hook_names(site: str, layer: int) -> tuple[str, str]:
    """(hook_name, hook_name_out): where the dictionary reads and what it reconstructs."""
    if site == "transcoder":
        return f"blocks.{layer}.ln2.hook_normalized", f"blocks.{layer}.hook_mlp_out"
    name = f"blocks.{layer}.hook_{site}"
    return name, name


def architecture_name(activation: str, site: str) -> str:
    """SAELens' architecture name: standard, topk, transcoder (ReLU); a TopK transcoder,
    which SAELens has no class for, is gptlab's "topk_transcoder"."""
    if site != "transcoder":
        return activation
    return "transcoder" if activation == "standard" else "topk_transcoder"


@dataclass(frozen=True)
class SAEConfig:
    """One dictionary: d_sae features reading d_in numbers at `site` of `layer` and writing
    d_out (= d_in but for a transcoder, whose d_out is the FFN output's width)."""

    d_in: int
    d_sae: int
    site: str
    layer: int
    activation: str = "topk"
    k: int = 16  # topk: features active per token (its L0)
    d_out: int | None = None
    model_name: str = ""

    def __post_init__(self) -> None:
        if self.site not in SITES:
            raise UsageError(f"site must be one of {', '.join(SITES)}, got {self.site!r}")
        if self.activation not in ACTIVATIONS:
            raise UsageError(f"activation must be one of {', '.join(ACTIVATIONS)}, got "
                             f"{self.activation!r}")
        for name in ("d_in", "d_sae", "k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name} must be a positive integer, got {value!r}")
        if isinstance(self.layer, bool) or not isinstance(self.layer, int) or self.layer < 0:
            raise UsageError(f"layer must be an integer >= 0, got {self.layer!r}")
        if self.activation == "topk" and self.k > self.d_sae:
            raise UsageError(f"k ({self.k}) cannot exceed d_sae ({self.d_sae})")
        if self.d_out is None:
            object.__setattr__(self, "d_out", self.d_in)

    @property
    def transcoder(self) -> bool:
        return self.site == "transcoder"

    @property
    def architecture(self) -> str:
        return architecture_name(self.activation, self.site)

    def to_cfg(self) -> dict[str, Any]:
        """cfg.json as SAELens writes it (with gptlab's own fields under metadata)."""
        hook_name, hook_name_out = hook_names(self.site, self.layer)
        cfg: dict[str, Any] = {
            "architecture": self.architecture, "d_in": self.d_in, "d_sae": self.d_sae,
            "dtype": "float32", "device": "cpu",
            # a transcoder's b_dec is its output's bias, not a centre for its input
            "apply_b_dec_to_input": not self.transcoder,
            # the training scale is folded into the weights at saving: raw activations in
            "normalize_activations": "none", "reshape_activations": "none",
            "metadata": {"model_name": self.model_name, "hook_name": hook_name,
                         "hook_head_index": None, "prepend_bos": False,
                         "gptlab": {"site": self.site, "layer": self.layer,
                                    "activation": self.activation}},
        }
        if self.activation == "topk":
            cfg["k"] = self.k
            cfg["rescale_acts_by_decoder_norm"] = False  # decoder rows are unit-norm
        if self.transcoder:
            cfg["d_out"] = self.d_out
            cfg["metadata"]["hook_name_out"] = hook_name_out
        return cfg

    @classmethod
    def from_cfg(cls, cfg: dict[str, Any]) -> SAEConfig:
        """The config a cfg.json written by `to_cfg` holds; a UsageError for any other."""
        try:
            ours = cfg["metadata"]["gptlab"]
            return cls(d_in=cfg["d_in"], d_sae=cfg["d_sae"], site=ours["site"],
                       layer=ours["layer"], activation=ours["activation"],
                       k=cfg.get("k", 16), d_out=cfg.get("d_out"),
                       model_name=cfg["metadata"].get("model_name", ""))
        except (KeyError, TypeError) as exc:
            raise UsageError(f"not a cfg.json gptlab wrote (missing {exc})") from None


@dataclass(frozen=True)
class TrainSettings:
    """How a dictionary is trained, under SAELens' names. A step reads
    train_batch_size_tokens // context_size windows of context_size tokens at random
    offsets of the training text, every position of each; training stops after
    training_tokens."""

    training_tokens: int = 1_000_000
    train_batch_size_tokens: int = 4096  # SAELens' default
    context_size: int | None = None  # None: the model's block_size
    lr: float = 1e-3
    lr_warm_up_steps: int = 0
    lr_decay_steps: int | None = None  # linear decay to 0 over the last N (None: 20%)
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    l1_coefficient: float = 5.0  # standard only; inputs are normalized to norm sqrt(d_in)
    aux_loss_coefficient: float = 1 / 32  # topk only; Gao et al.'s alpha
    # A feature is dead when it has not fired on the last dead_feature_window tokens'
    # worth of steps (SAELens counts steps; so do we).
    dead_feature_window: int = 50
    feature_sampling_window: int = 100  # standard: resample dead features this often
    checkpoint_every: int = 50  # steps between checkpoints (resume picks up from the last)
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("training_tokens", "train_batch_size_tokens", "dead_feature_window",
                     "feature_sampling_window", "checkpoint_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name} must be a positive integer, got {value!r}")
        if not self.lr > 0:
            raise UsageError(f"lr must be positive, got {self.lr!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainSettings:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})
