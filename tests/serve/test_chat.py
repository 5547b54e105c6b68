"""Chat templates are found where Hugging Face keeps them (chat_template.jinja,
chat_template.json, tokenizer_config.json's string or named list), with the special
tokens tokenizer_config.json names, rendered as transformers' apply_chat_template renders
them; a directory without one has none; a template that refuses the messages is one line."""

from __future__ import annotations

import json

import pytest

from gptlab.errors import UsageError
from gptlab.serve.chat import find_template

TEMPLATE = ("{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}"
            "{{ eos_token }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")
MESSAGES = [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize("files", [
    {"chat_template.jinja": TEMPLATE},
    {"chat_template.json": json.dumps({"chat_template": TEMPLATE})},
    {"tokenizer_config.json": json.dumps({"chat_template": TEMPLATE})},
    {"tokenizer_config.json": json.dumps({"chat_template": [
        {"name": "tool_use", "template": "x"}, {"name": "default", "template": TEMPLATE}]})},
])
def test_a_template_is_found_where_hugging_face_keeps_it(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    config = tmp_path / "tokenizer_config.json"
    settings = json.loads(config.read_text()) if config.exists() else {}
    config.write_text(json.dumps({**settings, "bos_token": {"content": "<s>"},
                                  "eos_token": "</s>"}))
    template = find_template(tmp_path)
    assert template.source == TEMPLATE
    assert template.render(MESSAGES) == "<s><user>Hi</s><assistant>"


def test_it_renders_as_transformers_apply_chat_template(tmp_path):
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models

    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": TEMPLATE, "bos_token": "<s>", "eos_token": "</s>"}))
    inner = Tokenizer(models.WordLevel({"<s>": 0, "</s>": 1, "[UNK]": 2}, unk_token="[UNK]"))
    hf = transformers.PreTrainedTokenizerFast(tokenizer_object=inner, bos_token="<s>",
                                              eos_token="</s>", chat_template=TEMPLATE)
    messages = [{"role": "system", "content": "Be brief."}, *MESSAGES,
                {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "?"}]
    assert find_template(tmp_path).render(messages) == hf.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True)


def test_no_template_no_directory_and_a_template_that_refuses(tmp_path):
    assert find_template(None) is None and find_template(tmp_path) is None
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    assert find_template(tmp_path) is None
    (tmp_path / "chat_template.jinja").write_text(
        "{% if messages[0]['role'] != 'system' %}{{ raise_exception('a system message "
        "first') }}{% endif %}")
    with pytest.raises(UsageError, match="refused these messages: a system message first"):
        find_template(tmp_path).render(MESSAGES)
    (tmp_path / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(UsageError, match="not readable JSON"):
        find_template(tmp_path)
