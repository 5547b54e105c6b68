"""stop_at_val's looks (gptlab.training.val_target): where they fall, what decides, and that
the loss that decides is `gptlab eval`'s."""

from __future__ import annotations

import math

import pytest
import torch

from gptlab.inference.evaluate import score_ids
from gptlab.model.config import GPTConfig
from gptlab.model.gpt import GPT
from gptlab.training import val_target
from gptlab.training.val_target import Seen, ValTarget, keeps_scoring, next_look

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_first_look_is_at_half_the_planned_steps_rounded_up_to_every():
    assert next_look(0, 360, 10, 1.7, []) == 180
    assert next_look(0, 450, 25, 1.88, []) == 225
    assert next_look(0, 7, 10, 1.0, []) == 7  # never past the end


def looks(*pairs):
    """Looks whose loss is also their first sample's estimate."""
    return [Seen(step, loss, loss) for step, loss in pairs]


def test_with_one_look_the_next_is_a_quarter_of_what_is_left():
    assert next_look(180, 360, 10, 1.7, looks((180, 1.85))) == 180 + 50  # 45 -> 50


def test_with_two_looks_the_next_is_where_their_line_crosses_the_target():
    # 0.1 lost in 50 steps: 0.002 a step, 0.06 above the target -> 30 steps on
    assert next_look(230, 360, 10, 1.7, looks((180, 1.86), (230, 1.76))) == 260
    # a crossing sooner than `every` steps: `every` steps on
    assert next_look(260, 360, 10, 1.7, looks((230, 1.76), (260, 1.701))) == 270
    # already below (an estimate corrected below the target): `every` steps on
    assert next_look(260, 360, 10, 1.7, looks((230, 1.76), (260, 1.69))) == 270
    # a loss that rose: the slope says nothing, a quarter of what is left
    assert next_look(260, 360, 10, 1.7, looks((230, 1.76), (260, 1.80))) == 260 + 30
    # at most a quarter of the steps left: the loss falls faster than the line as the rate
    # decays (130 left: 32.5, rounded up to 40)
    assert next_look(230, 360, 10, 1.7, looks((180, 1.8507), (230, 1.8070))) == 270
    assert next_look(300, 360, 10, 1.7, looks((200, 2.5), (300, 2.4))) == 320
    # never past max_iters
    assert next_look(350, 360, 10, 1.7, looks((300, 2.5), (350, 2.4))) == 360


def test_the_slope_is_the_first_samples_since_a_look_slope_base_steps_back():
    # looks at 210, 260, 270: the slope since 210 (60 steps back), not since 270's
    # neighbour at 260 (where the loss wiggled: 0.0012 in 10 steps)
    seen = looks((210, 1.7803), (260, 1.7085), (270, 1.7073))
    slope = (1.7803 - 1.7073) / 60
    assert next_look(270, 330, 10, 1.7, seen) == 270 + 10 * math.ceil(0.0073 / slope / 10)
    # the slope from the first sample's estimates (`trend`), the level from `loss`: a
    # loss from a larger sample (another bias) does not tilt the line
    mixed = [Seen(210, 1.7803, 1.7903), Seen(270, 1.7200, 1.7603)]
    assert next_look(270, 500, 10, 1.7, mixed) == 270 + 40  # 0.02 at 0.0005 a step


def test_a_look_goes_on_to_the_next_sample_unless_clearly_above_the_target():
    se = 0.01 / val_target.ABOVE_SE  # ABOVE_SE of them: 0.01
    # before any whole score: up to ABOVE_SE standard errors above the target
    assert keeps_scoring(1.71, se, 1.7, None) and not keeps_scoring(1.711, se, 1.7, None)
    # after one: the estimate corrected by the offset measured then
    assert keeps_scoring(1.696, se, 1.7, 0.014) and not keeps_scoring(1.70, se, 1.7, 0.014)
    assert keeps_scoring(1.72, se, 1.7, -0.014)


@pytest.fixture(scope="module")
def model_and_val():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=16, n_layer=1, n_head=2, n_embd=16))
    val = torch.randint(0, 11, (8 * 64 * 8 + 5,), generator=torch.Generator().manual_seed(1))
    return model, val


def test_a_look_scores_nested_samples_then_the_whole_split_as_gptlab_eval_does(model_and_val):
    model, val = model_and_val
    nll, scored = score_ids(model, val)  # gptlab eval's figure
    target = ValTarget(nll / scored + 1.0, val, 16, max_iters=100, every=10)
    # 513 windows: every 8th, 4th and 2nd (samples of >= MIN_WINDOWS), then all of them
    n = len(target.spans)
    assert target.ends == [math.ceil(n / 8), math.ceil(n / 4), math.ceil(n / 2), n]
    assert sorted(target.order) == list(range(n))
    for end, stride in zip(target.ends, (8, 4, 2, 1), strict=False):
        assert sorted(target.order[:end]) == list(range(0, n, stride))
    target.start(0)
    assert target.due == 50 and not target.is_due(49) and target.is_due(50)
    look = target.look(model, 50)
    assert look.met and look.whole == pytest.approx(nll / scored, abs=1e-6)
    # the estimate reported is the largest sample's before the whole
    assert look.share == target.ends[-2] / n
    assert 0 < look.se < 0.5 and abs(look.estimate - look.whole) < 4 * look.se
    assert model.training  # the model is handed back in the mode it had
    record = look.record(target.target)
    assert record["kind"] == "val_target" and record["met"] and record["step"] == 50
    assert record["estimate_share"] == look.share


def test_a_target_far_below_the_loss_costs_the_first_sample_only(model_and_val):
    model, val = model_and_val
    nll, scored = score_ids(model, val)
    target = ValTarget(nll / scored - 1.0, val, 16, max_iters=100, every=10)
    target.start(0)
    look = target.look(model, 50)
    assert not look.met and look.whole is None
    assert look.share == target.ends[0] / len(target.spans)  # every 8th window only
    assert target.due == 50 + 20  # a quarter of the 50 steps left, rounded up to 10
    # the estimate at the target: the samples grow to the whole split, which decides, and
    # the whole's difference from each sample is kept for the next looks
    near = ValTarget(look.estimate + 0.05, val, 16, max_iters=100, every=10)
    near.start(0)
    look = near.look(model, 50)
    assert look.whole is not None and look.met == (look.whole <= near.target)
    assert near.offsets[0] == pytest.approx(look.whole - near.looks[0].trend)
    assert near.offsets[-1] == 0.0


def test_a_sample_clearly_above_the_target_ends_the_look_there(model_and_val):
    model, val = model_and_val
    target = ValTarget(1.5, val, 16, max_iters=100, every=10)
    first = set(target.order[:target.ends[0]])
    spans = {span: i for i, span in enumerate(target.spans)}

    def score(model, part, autocast):  # every 8th window at about 1.0 a token, others 3.0
        losses = [(1.0 + 0.01 * (spans[w] % 3) if spans[w] in first else 3.0)
                  for w in part]
        counts = torch.tensor([float(w[1] - w[0] - 1) for w in part], dtype=torch.float64)
        return torch.tensor(losses, dtype=torch.float64) * counts, counts

    target._score = score
    look = target.look(model, 50)
    # the first sample (1.0) is under the target and goes on; the second (every 4th
    # window, about 2.0) is clearly above it: the look ends there, no whole scored
    assert look.whole is None and not look.met
    assert look.share == target.ends[1] / len(target.spans)
    assert look.estimate == pytest.approx(2.0, abs=0.02)
    assert target.looks[-1].trend == pytest.approx(1.01, abs=0.01)


def test_a_small_split_is_scored_whole_at_every_look(model_and_val):
    model, val = model_and_val
    small = val[:300]
    target = ValTarget(10.0, small, 16, max_iters=100, every=10)
    assert target.ends == [len(target.spans)]
    look = target.look(model, 50)
    nll, scored = score_ids(model, small)
    assert look.se == 0 and look.whole == look.estimate == pytest.approx(nll / scored)
    assert look.share == 1.0


def test_a_stop_request_ends_a_look_unfinished(model_and_val):
    model, val = model_and_val
    target = ValTarget(10.0, val, 16, max_iters=100, every=10, stop_requested=lambda: True)
    target.start(0)
    assert target.look(model, 50) is None and target.due == 50


def test_a_resume_past_the_first_look_looks_every_steps_on():
    target = ValTarget(1.0, torch.zeros(100, dtype=torch.long), 16, max_iters=360, every=10)
    target.start(200)
    assert target.due == 210
    target.start(360)  # at the end already: no look (the end scores the whole split)
    assert not target.is_due(360)


def test_under_autocast_the_looks_score_in_its_dtype_and_say_so(model_and_val):
    model, val = model_and_val
    nll, scored = score_ids(model, val)
    exact = nll / scored
    target = ValTarget(exact + 1.0, val, 16, max_iters=100, every=10)
    look = target.look(model, 50, torch.bfloat16)
    # far below the target: the bf16 figure decides, and the record says it is bf16's
    assert look.met and look.whole != exact and look.whole == pytest.approx(exact, abs=2e-2)
    assert look.autocast == look.whole_autocast == "bfloat16"
    record = look.record(target.target)
    assert record["autocast"] == record["whole_autocast"] == "bfloat16"


def test_an_autocast_whole_just_under_the_target_is_scored_again_in_float32(model_and_val):
    model, val = model_and_val
    bf16 = ValTarget(10.0, val, 16, max_iters=100, every=10).look(model, 50, torch.bfloat16)
    nll, scored = score_ids(model, val)
    # a target the bf16 whole meets by less than the margin: float32's figure decides
    target = ValTarget(bf16.whole + val_target.CONFIRM_MARGIN / 2, val, 16, max_iters=100,
                       every=10)
    look = target.look(model, 50, torch.bfloat16)
    assert look.whole == pytest.approx(nll / scored, abs=1e-6) and look.whole != bf16.whole
    assert look.autocast == "bfloat16" and look.whole_autocast is None
    assert look.met == (nll / scored <= target.target)
    # a target the bf16 whole misses: no second score, nothing met
    above = ValTarget(bf16.whole - 1e-4, val, 16, max_iters=100, every=10)
    look = above.look(model, 50, torch.bfloat16)
    assert not look.met
    assert look.whole_autocast == (None if look.whole is None else "bfloat16")
