"""The live training's tasks (gptlab.lab.live.tasks): induction rows repeat a segment of
distinct symbols at varying periods, and the prompt repeats."""

from gptlab.lab.live import tasks


def test_induction_rows_repeat_a_segment_of_distinct_symbols():
    text = tasks.induction_text(seed=3, rows=50)
    assert len(text) == 50 * 64 and set(text) <= set(tasks.INDUCTION_ALPHABET)
    periods = set()
    for r in range(50):
        row = text[64 * r: 64 * (r + 1)]
        # the segment's length: the smallest look-back that predicts the row's last 16
        p = next(p for p in range(8, 25) if row[-16:] == row[-16 - p:-p])
        assert len(set(row[-p:])) == p  # distinct symbols: only content says what follows
        periods.add(p)
    assert len(periods) > 8
    prompt = tasks.induction_prompt()
    assert prompt[:12] == prompt[12:24] and prompt[24:] == prompt[:3]
