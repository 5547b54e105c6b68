"""Writes the data of gptlab's lm-evaluation-harness tasks (src/gptlab/harness/tasks/) from
the embedded corpus's val split: `python tools/harness_tasks.py`. Needs the corpus extra.
tests/harness/test_shipped.py checks that the shipped files are what this writes."""

from __future__ import annotations

from gptlab.data.corpus import shakespeare_text
from gptlab.data.text import split_text
from gptlab.harness.shipped import (
    NEXT_LINE_FILE,
    TASKS_DIR,
    VAL_DOCS_FILE,
    make_next_line,
    make_val_docs,
    write_jsonl,
)


def main() -> None:
    _, val = split_text(shakespeare_text())  # as `gptlab prepare shakespeare` splits it
    write_jsonl(TASKS_DIR / NEXT_LINE_FILE, make_next_line(val))
    write_jsonl(TASKS_DIR / VAL_DOCS_FILE, make_val_docs(val))
    print(f"wrote {TASKS_DIR / NEXT_LINE_FILE} and {TASKS_DIR / VAL_DOCS_FILE}")


if __name__ == "__main__":
    main()
