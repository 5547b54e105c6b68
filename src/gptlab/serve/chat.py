"""Chat templates: how a model's tokenizer turns a list of messages into the text it was
trained to continue, found where Hugging Face keeps it and rendered as transformers renders
it. A model without one has no chat endpoint: none is made up, since a format the model
never saw would give answers that look right and are not.

Where a model directory keeps its template (transformers' own places): chat_template.jinja,
else chat_template.json's "chat_template", else tokenizer_config.json's "chat_template" (a
string, or a list of named templates of which "default" is used). The special tokens the
template may print (bos_token, eos_token) come from tokenizer_config.json.

Rendering is transformers' `render_jinja_template`, the function `apply_chat_template`
calls: templates are code from whoever published the model, and its sandboxed jinja2
environment is the one kept up against template escapes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gptlab.errors import UsageError

TEMPLATE_FILE, TEMPLATE_JSON, TOKENIZER_CONFIG = ("chat_template.jinja", "chat_template.json",
                                                  "tokenizer_config.json")


@dataclass(frozen=True)
class ChatTemplate:
    """A jinja2 chat template and the special tokens it may print."""

    source: str
    bos_token: str | None = None
    eos_token: str | None = None

    def render(self, messages: list[dict[str, Any]]) -> str:
        """The prompt for `messages` ([{role, content}]), with the assistant's turn opened
        (add_generation_prompt). A template that refuses the messages is a UsageError."""
        try:  # the optional extra `hf`, with jinja2
            from jinja2.exceptions import TemplateError
            from transformers.utils.chat_template_utils import render_jinja_template
        except ImportError:
            raise UsageError("rendering a chat template needs transformers (pip install "
                             "'gptlab[hf]')") from None

        special = {"bos_token": self.bos_token or "", "eos_token": self.eos_token or ""}
        try:
            rendered, _ = render_jinja_template(conversations=[messages],
                                                chat_template=self.source,
                                                add_generation_prompt=True, **special)
        except (TemplateError, TypeError, ValueError) as exc:
            raise UsageError(f"the model's chat template refused these messages: "
                             f"{_one_line(exc)}") from None
        return rendered[0]


def find_template(directory: str | Path | None) -> ChatTemplate | None:
    """The chat template kept in a model directory, or None (no directory, no template)."""
    if directory is None:
        return None
    folder = Path(directory)
    if not folder.is_dir():
        return None
    config = _json(folder / TOKENIZER_CONFIG)
    source = None
    if (folder / TEMPLATE_FILE).is_file():
        source = (folder / TEMPLATE_FILE).read_text(encoding="utf-8")
    elif isinstance(_json(folder / TEMPLATE_JSON).get("chat_template"), str):
        source = _json(folder / TEMPLATE_JSON)["chat_template"]
    else:
        source = _named(config.get("chat_template"))
    if not source:
        return None
    return ChatTemplate(source, _token(config.get("bos_token")), _token(config.get("eos_token")))


def _named(value: Any) -> str | None:
    """A template as tokenizer_config.json gives it: a string, or [{name, template}]."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        default = named.get("default")
        return default if isinstance(default, str) else None
    return None


def _token(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not readable JSON ({_one_line(exc)})") from None
    return data if isinstance(data, dict) else {}


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
