"""The offline tasks gptlab ships for lm-evaluation-harness, made from the embedded
corpus's val split (the 10% `gptlab prepare shakespeare` holds out):

- gptlab_next_line: which of four lines follows a given line of a speech (multiple
  choice; the other three are lines of about the same length drawn from elsewhere in the
  val split): acc, acc_norm.
- gptlab_val_bpb: the speeches of the val split's first 20,000 characters, each a
  document scored whole (loglikelihood_rolling): bits_per_byte, byte and word perplexity.

They compare runs (a model trained on the same corpus, before and after a change); they are
not a benchmark of language ability. The data lies beside the task YAMLs in tasks/ as
JSON lines, read with `datasets` from the local file (custom_dataset): nothing is fetched.
`make_next_line` and `make_val_docs` made them (tools/harness_tasks.py writes them again).
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

TASKS_DIR = Path(__file__).parent / "tasks"
NEXT_LINE_FILE, VAL_DOCS_FILE = "next_line.jsonl", "val_docs.jsonl"
QUESTIONS, SEED, VAL_CHARS = 200, 1234, 20_000
MAX_LINE = 80  # characters: a question and its answer fit a 128-character context


def tasks(include_path: str | Path | None = None) -> Any:
    """lm-eval's TaskManager with gptlab's tasks (and `include_path`'s, if given) added."""
    from lm_eval.tasks import TaskManager  # the optional extra, only when tasks are read

    paths = [str(TASKS_DIR)] + ([str(include_path)] if include_path is not None else [])
    return TaskManager(include_path=paths)


def _speeches(text: str) -> list[list[str]]:
    """The lines of each speech (a block after its speaker's NAME: line)."""
    return [block.split("\n")[1:] for block in text.split("\n\n")]


def make_next_line(val_text: str, questions: int = QUESTIONS, seed: int = SEED) -> list[dict]:
    """Questions {line, choices, label}: `line` and the line after it within one speech,
    among three other speech lines of the val split of about its length, in a random order
    (lines of at most MAX_LINE characters)."""
    def short(line: str) -> bool:
        return bool(line.strip()) and len(line) <= MAX_LINE

    speeches = _speeches(val_text)
    pool = sorted({line for speech in speeches for line in speech if short(line)})
    pairs = [(a, b) for speech in speeches for a, b in itertools.pairwise(speech)
             if short(a) and short(b)]
    rng = random.Random(seed)
    out = []
    for line, answer in rng.sample(pairs, questions):
        # Wrong answers of about the answer's length, so that a summed log-likelihood
        # (acc) does not simply pick the shortest line.
        others = sorted((c for c in pool if c not in (line, answer)),
                        key=lambda c: abs(len(c) - len(answer)))
        near = [c for c in others if abs(len(c) - len(answer)) <= max(2, len(answer) // 10)]
        wrong = rng.sample(near if len(near) >= 3 else others[:3], 3)
        choices = [answer, *wrong]
        rng.shuffle(choices)
        out.append({"line": line, "choices": choices, "label": choices.index(answer)})
    return out


def make_val_docs(val_text: str, chars: int = VAL_CHARS) -> list[dict]:
    """Documents {text}: the speeches (blank-line separated) of val_text's first `chars`
    characters that begin and end within them."""
    head = val_text[:chars]
    speeches = head.split("\n\n")[1:-1]  # the first and last may be cut by the slice
    return [{"text": s} for s in speeches if s.strip()]


def next_line(**_: Any) -> Any:
    """gptlab_next_line's data (custom_dataset: lm-eval passes the task's metadata)."""
    return _local(NEXT_LINE_FILE)


def val_docs(**_: Any) -> Any:
    """gptlab_val_bpb's data."""
    return _local(VAL_DOCS_FILE)


def _local(name: str) -> Any:
    import datasets  # lm-eval's dependency, only when a task is read

    return datasets.load_dataset("json", data_files={"test": str(TASKS_DIR / name)})


def write_jsonl(path: Path, records: list[dict]) -> None:
    """records as JSON lines, one a line, written atomically."""
    # only tools/harness_tasks.py writes: the tasks' readers need none of it
    from gptlab.files.atomic import atomic_write_text

    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
