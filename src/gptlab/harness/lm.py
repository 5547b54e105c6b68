"""The `gptlab` model of lm-evaluation-harness: any model `gptlab.load` takes, scored the
way the harness's own `hf` backend scores a Hugging Face model, request for request.

    lm_eval.simple_evaluate(model="gptlab", model_args="pretrained=runs/demo", tasks=[...])

model_args: pretrained (a run, RUN/best, a model directory, a Hugging Face directory or hub
name, the shipped model's name), device (default auto), batch_size (requests per forward
pass; "auto" is 32), max_length (tokens the model sees at once; default its context),
context and rope_scaling (as `gptlab.load` takes them), prefix_token_id (see below),
stride (loglikelihood_rolling in `gptlab eval`'s sliding windows instead of the harness's).

How each request is scored, as lm_eval/models/huggingface.py does it (lm-eval 0.4.13):
- loglikelihood: context and continuation are encoded together and split (the context's
  trailing spaces go to the continuation, lm_eval.api.model.TemplateLM); an empty context
  becomes the prefix token; context + continuation is cut from the left to max_length + 1
  tokens and the last dropped; log-softmax in float32; is_greedy: every continuation token
  is its position's argmax. Batches are lm-eval's own Collator (longest first, one forward
  for choices that share all but their last token).
- loglikelihood_rolling: the harness's disjoint windows (lm_eval.utils): the first token
  predicted from the prefix token, each window max_length tokens. With stride=S instead:
  gptlab.inference.evaluate's windows (`gptlab eval --context max_length --stride S` on
  the prefix token followed by the text), which score every token but the first from
  context - S tokens at least.
- generate_until: gptlab.inference.sampling.generate_text, greedy at temperature 0 (or
  do_sample false), cut before the first stop string (the end-of-text token's text is one
  when the tokenizer has it), at most max_gen_toks tokens (default 256) from a context cut
  from the left to max_length - max_gen_toks tokens.

The prefix token: a character-level gptlab model has no BOS or EOS. The prefix is the
tokenizer's <|endoftext|> where it has one, else "\\n" (text usually starts after a
newline; gptlab sample's default prompt too), else id 0; prefix_token_id= overrides it.
lm-eval's `hf` backend gives the same scores on the model's Hugging Face export when given
the same id (`prefix_token_id=N`): exports are left without an end-of-text token, so that
exporting never changes the vocabulary.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

from gptlab.errors import GptlabError, UsageError
from gptlab.inference.evaluate import score_ids
from gptlab.inference.sampling import generate_text
from gptlab.loading import load
from gptlab.model.decoding import SamplingSettings

LM_EVAL = ">=0.4.13"  # as pyproject.toml's extra `harness` pins it
HARNESS_HINT = "pip install 'gptlab[harness]'"


class HarnessMissing(GptlabError, ImportError):
    """lm-evaluation-harness is not installed; the message says what to install."""


try:  # the optional extra `harness`
    from lm_eval.api.model import TemplateLM
    from lm_eval.api.registry import register_model
    from lm_eval.models.utils import Collator, handle_stop_sequences, normalize_gen_kwargs
    from lm_eval.utils import (
        get_rolling_token_windows,
        make_disjoint_window,
        simple_parse_args_string,
    )
except ImportError as exc:
    raise HarnessMissing(f"evaluating on lm-evaluation-harness needs lm-eval {LM_EVAL} "
                         f"({exc}): {HARNESS_HINT}") from None

AUTO_BATCH = 32  # requests per forward pass for batch_size=auto
MAX_GEN_TOKS = 256  # as the hf backend's default


@register_model("gptlab")
class GptlabLM(TemplateLM):
    """lm-eval's model class for gptlab: `pretrained` is a name or path `gptlab.load`
    takes, or a loaded GPT with its `tokenizer`."""

    def __init__(self, pretrained: Any = None, tokenizer: Any = None, device: str | None = None,
                 batch_size: int | str = 1, max_batch_size: int | None = None,
                 max_length: int | str | None = None, context: int | str | None = None,
                 rope_scaling: str | None = None, prefix_token_id: int | str | None = None,
                 stride: int | str | None = None, max_gen_toks: int | str = MAX_GEN_TOKS
                 ) -> None:
        super().__init__()
        if pretrained is None:
            raise UsageError("model_args must give pretrained=RUN_OR_MODEL (a run, a model "
                             "directory, a Hugging Face directory or shakespeare)")
        if isinstance(pretrained, torch.nn.Module):
            if tokenizer is None:
                raise UsageError("a model passed as pretrained needs its tokenizer=")
            model = pretrained
        else:
            model, tokenizer = load(pretrained, device="auto" if device is None else device,
                                    context=_int("context", context), rope_scaling=rope_scaling)
        self.model, self.tokenizer = model.eval(), tokenizer
        self._device = next(model.parameters()).device
        model_context = getattr(model, "context", model.config.block_size)
        self._max_length = _int("max_length", max_length) or model_context
        if self._max_length > model_context:
            raise UsageError(f"max_length {self._max_length} exceeds the model's context "
                             f"({model_context}); give context= to run it longer")
        self._auto_batch = str(batch_size).startswith("auto")
        self._batch_size = AUTO_BATCH if self._auto_batch else _int("batch_size", batch_size)
        if self._batch_size < 1:
            raise UsageError(f"batch_size must be at least 1 or auto, got {batch_size!r}")
        self._eot = _end_of_text(tokenizer)
        given = _int("prefix_token_id", prefix_token_id)
        self._prefix = given if given is not None else _default_prefix(tokenizer, self._eot)
        self.stride = _int("stride", stride)
        self._max_gen_toks = _int("max_gen_toks", max_gen_toks)

    @classmethod
    def create_from_arg_obj(cls, arg_dict: dict[str, Any],
                            additional_config: dict[str, Any] | None = None) -> GptlabLM:
        """As lm-eval makes every model, but a model_args value (batch_size=16) wins over the
        command line's default of the same name instead of being given twice."""
        given = {k: v for k, v in (additional_config or {}).items() if v is not None}
        known = [name for name in inspect.signature(cls).parameters if name != "tokenizer"]
        unknown = [name for name in arg_dict if name not in known]
        if unknown:
            raise UsageError(f"model_args: gptlab takes no {unknown[0]}= (it takes "
                             f"{', '.join(known)})")
        return cls(**{**given, **arg_dict})

    @classmethod
    def create_from_arg_string(cls, arg_string: str,
                               additional_config: dict[str, Any] | None = None) -> GptlabLM:
        return cls.create_from_arg_obj(simple_parse_args_string(arg_string), additional_config)

    # ------------------------------------------------------------------ what lm-eval reads

    @property
    def eot_token_id(self) -> int | None:
        return self._eot

    @property
    def prefix_token_id(self) -> int:
        return self._prefix

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def max_gen_toks(self) -> int:
        return self._max_gen_toks

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def batch_sizes(self) -> dict[str, int]:
        """What lm-eval's table header shows after batch_size: auto, in parentheses: the
        size auto ran (none where a number was given: the header shows it)."""
        return {"auto": self._batch_size} if self._auto_batch else {}

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def tokenizer_name(self) -> str:
        return f"gptlab-{getattr(self.tokenizer, 'kind', 'tokenizer')}"

    def tok_encode(self, string: str, add_special_tokens: bool | None = None,
                   left_truncate_len: int | None = None, **kwargs: Any) -> list[int]:
        ids = self.tokenizer.encode(string)  # gptlab's tokenizers add no special tokens
        return ids[-left_truncate_len:] if left_truncate_len else ids

    def tok_decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    # ------------------------------------------------------------------ scoring

    @torch.no_grad()
    def _loglikelihood_tokens(self, requests: list[tuple[Any, list[int], list[int]]],
                              disable_tqdm: bool = False, **kwargs: Any
                              ) -> list[tuple[float, bool]]:
        """(log-probability, is_greedy) of each request's continuation tokens, batched and
        cut as the hf backend's _loglikelihood_tokens does it."""
        results: list[tuple[float, bool]] = []
        order = Collator(requests, sort_fn=_longest_first, group_by="contexts",
                         group_fn=lambda req: req[-2] + req[-1][:-1])
        longest = max((len(cont) for _, _, cont in requests), default=0)
        if longest > self.max_length:  # the hf backend asserts it: the context would be lost
            raise UsageError(f"a continuation of {longest:,} tokens is longer than max_length "
                             f"({self.max_length:,}): nothing would predict its first token")
        for chunk in order.get_batched(n=self.batch_size):
            inputs = [torch.tensor((ctx + cont)[-(self.max_length + 1):][:-1], dtype=torch.long,
                                   device=self.device) for _, ctx, cont in chunk]
            # Right-padded with id 0, as the hf backend pads: causal attention keeps the
            # padding out of every real position's logits.
            logits, _ = self.model(pad_sequence(inputs, batch_first=True))
            logprobs = F.log_softmax(logits.float(), dim=-1)
            for (key, ctx, cont), rows, x in zip(chunk, logprobs, inputs, strict=True):
                rows = rows[len(x) - len(cont):len(x)].unsqueeze(0)  # the continuation's
                greedy = rows.argmax(dim=-1)
                for key_, cont_, rows_ in order.get_cache(req_str=key, cxt_toks=ctx,
                                                          cont_toks=cont, logits=rows):
                    target = torch.tensor(cont_, dtype=torch.long, device=self.device)[None]
                    is_greedy = bool((greedy[:, -target.shape[1]:] == target).all())
                    picked = torch.gather(rows_, 2, target.unsqueeze(-1)).squeeze(-1)
                    answer = (float(picked.sum()), is_greedy)
                    results.append(answer)
                    if key_ is not None:
                        self.cache_hook.add_partial("loglikelihood", key_, answer)
        return order.get_original(results)

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False
                              ) -> list[float]:
        """Log-probability of each whole text, every token scored once."""
        out = []
        for (text,) in (req.args for req in requests):
            ids = self.tok_encode(text)
            if self.stride is not None:
                nll, _ = score_ids(self.model, torch.tensor([self.prefix_token_id, *ids]),
                                   context=self.max_length, stride=self.stride,
                                   batch_size=self.batch_size)
                total = -nll
            else:
                windows = [(None, *make_disjoint_window(w)) for w in get_rolling_token_windows(
                    token_list=ids, prefix_token=self.prefix_token_id,
                    max_seq_len=self.max_length, context_len=1)]
                total = sum(lp for lp, _ in self._loglikelihood_tokens(windows))
            self.cache_hook.add_partial("loglikelihood_rolling", (text,), total)
            out.append(total)
        return out

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        """Each request's continuation, sampled by gptlab.inference.sampling."""
        out = []
        eos = None if self._eot is None else self.tok_decode([self._eot])
        for context, gen_kwargs in (req.args for req in requests):
            kwargs = normalize_gen_kwargs(gen_kwargs, self.max_gen_toks)
            until = handle_stop_sequences(kwargs.pop("until", None), eos=eos)
            max_gen_toks = kwargs.pop("max_gen_toks")
            ids = self.tok_encode(context)
            room = self.max_length - max_gen_toks
            prompt = context if room <= 0 or len(ids) <= room else self.tok_decode(ids[-room:])
            settings = SamplingSettings(
                temperature=float(kwargs.get("temperature", 0.0)) if kwargs.get("do_sample")
                else 0.0, top_k=kwargs.get("top_k"), top_p=kwargs.get("top_p"))
            text = generate_text(self.model, self.tok_encode, self.tok_decode, prompt,
                                 max_gen_toks, settings, stop=[s for s in until if s])
            self.cache_hook.add_partial("generate_until", (context, gen_kwargs), text)
            out.append(text)
        return out


def _longest_first(req: tuple[Any, list[int], list[int]]) -> tuple[int, tuple[int, ...]]:
    """The hf backend's order: the longest request first, ties by their tokens."""
    tokens = req[1] + req[2]
    return -len(tokens), tuple(tokens)


def _int(name: str, value: int | str | None) -> int | None:
    """A model_args value (a string from the command line) as an integer, or None."""
    if value is None or isinstance(value, int):
        return value
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"{name} must be an integer, got {value!r}") from None


def _end_of_text(tokenizer: Any) -> int | None:
    """The id of <|endoftext|> in a Hugging Face tokenizer (GPT-2's), or None."""
    inner = getattr(tokenizer, "tokenizer", None)
    return inner.token_to_id("<|endoftext|>") if hasattr(inner, "token_to_id") else None


def _default_prefix(tokenizer: Any, eot: int | None) -> int:
    """The end-of-text token, else the newline's id, else 0 (see the module's docstring)."""
    if eot is not None:
        return eot
    try:
        newline = tokenizer.encode("\n")
    except UsageError:  # a character vocabulary without "\n"
        newline = []
    return newline[0] if len(newline) == 1 else 0
