"""The `gptlab` model of lm-evaluation-harness against the harness's own `hf` backend on the
Hugging Face export of the same tiny run (GPT-2 and Llama shapes): the same log-likelihood
for every request, the same accuracy and bits per byte, on the shipped tasks and on a task
written here; loglikelihood_rolling against `gptlab eval`, generate_until against
`gptlab sample --greedy`."""

from __future__ import annotations

import json
import math

import lm_eval
import pytest
import torch
from tools.tinyrun import train_steps

from gptlab.cli.main import main
from gptlab.convert.hf import to_hf
from gptlab.data.tokenizer import load_tokenizer
from gptlab.errors import UsageError
from gptlab.harness import GptlabLM, tasks
from gptlab.harness.shipped import TASKS_DIR, VAL_DOCS_FILE
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.model_dir import TOKENIZER_FILE, save_model
from gptlab.pretrained import folder

BLOCK = 96  # shorter than many a next-line question: the left truncation is exercised
NEWLINE = 0  # "\n" in the shipped model's character vocabulary
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}

# A task of our own, written as a user would: local JSON lines, dataset_path json. Empty
# contexts (the prefix token), contexts ending in spaces (moved to the continuation) and
# continuations longer than the context are all scored.
HIDDEN = [
    {"context": "ROMEO:\nBut soft, what light through yonder",
     "choices": [" window", " door", " wall"], "label": 0},
    {"context": "", "choices": ["KING", "QUEEN", "FOOL"], "label": 0},
    {"context": "To be, or not to be: ", "choices": ["that is the question", "whatever"],
     "label": 0},
    {"context": "A", "choices": [" horse! a horse! my kingdom for a horse!", "pple"], "label": 0},
    {"context": "And what of th", "choices": ["e", "a", "o"], "label": 0},  # is_greedy, likely
]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    for name, value in OFFLINE.items():
        monkeypatch.setenv(name, value)


@pytest.fixture(scope="module", params=["tiny-gpt2", "tiny-llama"])
def exported(request, tmp_path_factory, one_thread_module):
    """(run directory, its Hugging Face export): a tiny character run of the shipped model's
    vocabulary, trained a little on the shipped val documents."""
    tokenizer = load_tokenizer(folder("shakespeare") / TOKENIZER_FILE)
    text = "".join(json.loads(line)["text"] + "\n\n"
                   for line in (TASKS_DIR / VAL_DOCS_FILE).read_text().splitlines())
    torch.manual_seed(0)
    model = GPT(GPTConfig.from_preset(request.param, vocab_size=tokenizer.vocab_size,
                                      block_size=BLOCK))
    # a trained model's scores, not a uniform one's
    train_steps(model, torch.tensor(tokenizer.encode(text)), 300, lr=1e-2, seed=0)
    root = tmp_path_factory.mktemp(request.param)
    save_model(model, root / "run")
    tokenizer.save(root / "run" / TOKENIZER_FILE)
    to_hf(model, root / "hf", tokenizer)
    return root / "run", root / "hf"


@pytest.fixture(scope="module")
def hidden_task(tmp_path_factory):
    """A multiple-choice task in a folder of its own, as a user writes one."""
    folder_ = tmp_path_factory.mktemp("hidden-task")
    (folder_ / "hidden.jsonl").write_text("".join(json.dumps(d) + "\n" for d in HIDDEN))
    (folder_ / "hidden.yaml").write_text(
        "task: hidden_words\ndataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {folder_ / 'hidden.jsonl'}\n"
        "test_split: test\noutput_type: multiple_choice\ndoc_to_text: '{{context}}'\n"
        "target_delimiter: ''\ndoc_to_choice: '{{choices}}'\ndoc_to_target: '{{label}}'\n"
        "metric_list:\n  - metric: acc\n  - metric: acc_norm\n")
    return folder_


def _evaluate(model: str, model_args: str, task_names: list[str], include=None) -> dict:
    return lm_eval.simple_evaluate(model=model, model_args=model_args, tasks=task_names,
                                   task_manager=tasks(include), log_samples=True,
                                   batch_size=8, device="cpu")


def _responses(result: dict, task: str) -> list:
    """Every request's answer, in the task's order: (log-likelihood, is_greedy) pairs for
    multiple choice, a log-likelihood for a rolling task."""
    out = []
    for sample in sorted(result["samples"][task], key=lambda s: s["doc_id"]):
        out.extend(r[0] for r in sample["resps"])
    return out


@pytest.mark.slow
def test_the_gptlab_model_scores_every_request_as_the_hf_backend_does(exported, hidden_task):
    run, hf_dir = exported
    names = ["gptlab_next_line", "gptlab_val_bpb", "hidden_words"]
    ours = _evaluate("gptlab", f"pretrained={run}", names, hidden_task)
    theirs = _evaluate("hf", f"pretrained={hf_dir},prefix_token_id={NEWLINE},dtype=float32",
                       names, hidden_task)
    for task in ("gptlab_next_line", "hidden_words"):
        a, b = _responses(ours, task), _responses(theirs, task)
        assert len(a) == len(b) == sum(len(s["resps"]) for s in ours["samples"][task])
        assert max(abs(x[0] - y[0]) for x, y in zip(a, b, strict=True)) < 1e-4
        assert [x[1] for x in a] == [y[1] for y in b]  # is_greedy
        for metric in ("acc,none", "acc_norm,none"):
            assert ours["results"][task][metric] == theirs["results"][task][metric]
    assert any(greedy for _, greedy in _responses(ours, "hidden_words"))  # "th" -> "e"
    a, b = _responses(ours, "gptlab_val_bpb"), _responses(theirs, "gptlab_val_bpb")
    assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-4
    bpb = ours["results"]["gptlab_val_bpb"]["bits_per_byte,none"]
    assert 1 < bpb < math.log2(76)  # trained: better than uniform over the vocabulary
    assert bpb == pytest.approx(theirs["results"]["gptlab_val_bpb"]["bits_per_byte,none"],
                                abs=1e-6)


class _Request:  # what the model methods read of lm-eval's Instance
    def __init__(self, *args):
        self.args = args


@pytest.mark.slow
def test_rolling_scores_equal_gptlab_eval_sliding_windows(exported, tmp_path, capsys):
    run, _ = exported
    text = "".join(d["context"] + d["choices"][0] + "\n" for d in HIDDEN) * 3
    text_file = tmp_path / "text.txt"
    text_file.write_text("\n" + text)  # the prefix token, as the harness puts it first

    def gptlab_eval(*flags: str) -> float:
        assert main(["eval", str(run), "--text-file", str(text_file), "--json", "--device",
                     "cpu", *flags]) == 0
        figures = json.loads(capsys.readouterr().out)
        return -figures["loss"] * figures["tokens_scored"]

    strided = GptlabLM(pretrained=str(run), device="cpu", stride=20, batch_size=4)
    assert strided.loglikelihood_rolling([_Request(text)])[0] == pytest.approx(
        gptlab_eval("--context", str(BLOCK), "--stride", "20"), abs=1e-4)
    # The harness's own windows are gptlab eval's of one token more at a stride of
    # max_length, when the text fills its last window (its last window reaches back further)
    m = BLOCK - 1
    whole = text[:3 * m]
    text_file.write_text("\n" + whole)
    harness = GptlabLM(pretrained=str(run), device="cpu", max_length=m)
    assert harness.loglikelihood_rolling([_Request(whole)])[0] == pytest.approx(
        gptlab_eval("--context", str(m + 1), "--stride", str(m)), abs=1e-4)


@pytest.mark.slow
def test_generate_until_is_gptlab_sample_greedy(exported, capsys):
    run, _ = exported
    model = GptlabLM(pretrained=str(run), device="cpu")
    prompt = "ROMEO:\nBut soft, what light"
    [free] = model.generate_until([_Request(prompt, {"until": ["\n\n"], "max_gen_toks": 30})])
    stop = free[12:14]  # a stop string the greedy text meets (a tiny model repeats itself)
    [cut] = model.generate_until([_Request(prompt, {"until": [stop], "max_gen_toks": 30})])
    assert len(free) == 30 and cut == free[:free.index(stop)]
    for text, until in ((free, "\n\n"), (cut, stop)):
        assert main(["sample", str(run), "--prompt", prompt, "--greedy", "--max-new-tokens",
                     "30", "--stop", until, "--no-prompt", "--device", "cpu"]) == 0
        assert capsys.readouterr().out == text + "\n"


@pytest.mark.slow
def test_the_shipped_model_runs_the_shipped_tasks_offline():
    result = lm_eval.simple_evaluate(model="gptlab", model_args="pretrained=shakespeare",
                                     tasks=["gptlab_next_line", "gptlab_val_bpb"],
                                     task_manager=tasks(), limit=8, device="cpu")
    assert 0 <= result["results"]["gptlab_next_line"]["acc,none"] <= 1
    assert 1 < result["results"]["gptlab_val_bpb"]["bits_per_byte,none"] < 4


def test_a_loaded_model_is_passed_as_it_is(save_char_model, tmp_path):
    _, model, tokenizer = save_char_model(tmp_path / "m", "abc\n", preset="tiny-gpt2")
    lm = GptlabLM(pretrained=model, tokenizer=tokenizer, batch_size="auto")
    [(logprob, _)] = lm.loglikelihood([_Request("ab", "c")])
    with torch.no_grad():
        logits, _ = model(torch.tensor([tokenizer.encode("ab")]))
    expected = torch.log_softmax(logits[0, -1], -1)[tokenizer.encode("c")[0]]
    assert logprob == pytest.approx(float(expected), abs=1e-5)
    assert lm.prefix_token_id == tokenizer.encode("\n")[0] and lm.max_length == 32


@pytest.mark.parametrize(("args", "message"), [
    ({}, "pretrained="),
    ({"pretrained": "no-such-run"}, "no such run"),
    ({"pretrained": "shakespeare", "max_length": "129"}, "exceeds the model's context"),
    ({"pretrained": "shakespeare", "stride": "half"}, "stride must be an integer"),
    ({"pretrained": "shakespeare", "batch_size": "0"}, "batch_size must be at least 1"),
])
def test_bad_model_args_are_one_line_usage_errors(args, message):
    with pytest.raises(UsageError, match=message):
        GptlabLM(device="cpu", **args)


def test_a_misspelt_model_arg_is_named_not_ignored():
    with pytest.raises(UsageError, match="gptlab takes no strid= .it takes pretrained, device"):
        GptlabLM.create_from_arg_string("pretrained=shakespeare,strid=8", {"batch_size": 2})


@pytest.mark.slow
def test_plain_lm_eval_does_not_know_the_model_as_docs_harness_says(tmp_path):
    """docs/harness.md says that `lm-eval run --model gptlab` without `gptlab harness` or the
    import does not know the model, quoting lm-eval's last line: both hold."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    docs = " ".join((Path(__file__).parents[2] / "docs" / "harness.md").read_text().split())
    argv = [sys.executable, "-c", "from lm_eval.__main__ import cli_evaluate; cli_evaluate()",
            "run", "--model", "gptlab", "--model_args", "pretrained=shakespeare", "--tasks",
            "gptlab_next_line", "--device", "cpu"]
    for extra, last in (([], "Tasks not found: gptlab_next_line"),
                        (["--include_path", str(TASKS_DIR)],
                         "ValueError: Attempted to load model 'gptlab', but no model for this "
                         "name found!")):
        done = subprocess.run([*argv, *extra], capture_output=True, text=True, timeout=300,
                              cwd=tmp_path, env={**os.environ, **OFFLINE})
        assert done.returncode != 0 and last in done.stderr.splitlines()[-1], done.stderr
        assert last.replace("ValueError: ", "") in docs
    assert "lm-eval 0.4.13 registers only the models of its own package" in docs
