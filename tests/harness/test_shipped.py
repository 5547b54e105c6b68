"""The tasks gptlab ships for lm-evaluation-harness: their data is what the embedded
corpus's val split gives (tools/harness_tasks.py), and lm-eval finds them by name."""

from __future__ import annotations

import json

from gptlab.data.corpus import shakespeare_text
from gptlab.data.text import split_text
from gptlab.harness import tasks
from gptlab.harness.shipped import (
    MAX_LINE,
    NEXT_LINE_FILE,
    TASKS_DIR,
    VAL_DOCS_FILE,
    make_next_line,
    make_val_docs,
)

NAMES = ("gptlab_next_line", "gptlab_val_bpb")


def _shipped(name: str) -> list[dict]:
    return [json.loads(line) for line in (TASKS_DIR / name).read_text().splitlines()]


def test_the_shipped_data_is_what_the_val_split_gives():
    _, val = split_text(shakespeare_text())  # as `gptlab prepare shakespeare` splits
    assert _shipped(NEXT_LINE_FILE) == make_next_line(val)
    assert _shipped(VAL_DOCS_FILE) == make_val_docs(val)


def test_a_question_is_a_line_its_successor_and_three_other_lines_of_its_length():
    text = "\n\n".join(f"A{i}:\nline {i} is here\nand {i} ends" for i in range(9))
    for question in make_next_line(text, questions=5, seed=0):
        answer = question["choices"][question["label"]]
        i = question["line"].split()[1]
        assert (question["line"], answer) == (f"line {i} is here", f"and {i} ends")
        assert len(set(question["choices"])) == 4
        assert {len(c) for c in question["choices"]} == {len(answer)}  # never "line j ..."


def test_the_shipped_questions_fit_the_shipped_models_context():
    questions = _shipped(NEXT_LINE_FILE)
    assert len(questions) == 200 and all(0 <= q["label"] < 4 for q in questions)
    assert max(len(c) for q in questions for c in [q["line"], *q["choices"]]) <= MAX_LINE
    docs = _shipped(VAL_DOCS_FILE)
    assert len(docs) > 100 and all(d["text"].split("\n")[0].endswith(":") for d in docs)


def test_lm_eval_finds_the_shipped_tasks_by_name(tmp_path):
    manager = tasks(tmp_path)
    assert set(NAMES) <= set(manager.all_tasks)
    assert {p.name for p in TASKS_DIR.iterdir()} == {
        f"{n}.yaml" for n in NAMES} | {NEXT_LINE_FILE, VAL_DOCS_FILE}


def test_the_shipped_tasks_say_how_their_metrics_aggregate(tmp_path, caplog, monkeypatch):
    """lm-eval warned six times that gptlab_val_bpb's metrics had no aggregation and no
    direction; each now says the ones it defaulted to."""
    import logging

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with caplog.at_level(logging.WARNING, logger="lm_eval"):
        loaded = tasks(tmp_path).load(list(NAMES))["tasks"]
    said = [r.getMessage() for r in caplog.records]
    assert not [m for m in said if "is defined, but" in m], said
    bpb = loaded["gptlab_val_bpb"]
    assert {k: f.__name__ for k, f in bpb.aggregation().items()} == {
        "word_perplexity": "weighted_perplexity", "byte_perplexity": "weighted_perplexity",
        "bits_per_byte": "bits_per_byte"}
    assert set(bpb.higher_is_better().values()) == {False}
