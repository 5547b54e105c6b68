"""`gptlab experiment phase` at its --quick size, checked for what must hold whatever the
models learned: the grid is 1- and 2-layer attention-only models, two seeds, on both tasks;
every evaluation left a record; the last record's head scores and in-context-learning score
are the final weights' own, recomputed directly; the crossing is the first record past 5x
chance; a resumed watcher keeps what came before; a second run reuses every run. (The task
it trains on: tests/data/test_synthetic.py.)"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from gptlab.data.prepared import load_data
from gptlab.experiments import baselines, phase
from gptlab.experiments.claims import evaluate
from gptlab.interp.heads import chance_scores, head_scores, repeated_random_tokens
from gptlab.model_dir import load_model
from gptlab.training.runs import list_runs

pytestmark = pytest.mark.usefixtures("one_thread_module")
QUICK = phase.SIZES["quick"]


@pytest.fixture(scope="module")
def experiment(quick_experiment):
    return quick_experiment("phase")


def test_the_grid_is_one_and_two_layers_attention_only_two_seeds_two_tasks(experiment,
                                                                            results, png_magic):
    names = {f"{task}-L{n}-seed-{s}" for task in phase.TASKS for n in phase.LAYERS
             for s in (1337, 1338)}
    assert set(results["runs"]) == names
    for name, run in results["runs"].items():
        config = load_model(experiment / run["dir"]).config
        assert config.mlp == "none" and f"L{config.n_layer}-" in name
        assert all(b.mlp is None for b in load_model(experiment / run["dir"]).blocks)
        steps = [r["step"] for r in phase.read_records(experiment / run["dir"] / phase.PHASE_FILE)]
        assert steps == list(range(0, QUICK.steps + 1, QUICK.eval_every))
    # where `gptlab runs` and the lab look: a runs folder holding the experiment's folder
    listed = {r.name for r in list_runs(experiment.parent)}
    assert {f"{experiment.name}/runs/{name}" for name in names} <= listed
    for task in phase.TASKS:
        assert (experiment / phase.figure_name(task)).read_bytes().startswith(png_magic)
    assert "seed-1337 1337" in (experiment / "report.md").read_text()


def test_the_last_record_is_the_final_models_own(experiment, results):
    block = QUICK.model["block_size"]
    early, late = phase.icl_positions(block)
    for task, found in results["tasks"].items():
        # the data by name: the segments generated in the folder, the text beside it
        assert found["data"] == {"segments": "segments-data", "text": "data"}[task]
        data = load_data((experiment if task == "segments" else experiment.parent)
                         / found["data"])
        tokens = repeated_random_tokens(data.vocab_size, block // 2, QUICK.probe_batch,
                                        torch.Generator().manual_seed(phase.PROBE_SEED))
        assert found["chance"] == chance_scores(tokens)
        windows = torch.as_tensor(data.val[:QUICK.icl_windows * block].astype("int64")).view(
            QUICK.icl_windows, block)
        for name, run in found["runs"].items():
            model = load_model(experiment / "runs" / name).eval()
            last = run["records"][-1]
            scores = head_scores(model, tokens)
            assert last["induction"] == scores["induction"].tolist()
            assert last["previous_token"] == scores["previous_token"].tolist()
            with torch.no_grad():
                logits, _ = model(windows)
            # the loss of token k, predicted from tokens 0..k-1, averaged over the windows
            loss = F.cross_entropy(logits[:, :-1].transpose(1, 2), windows[:, 1:],
                                   reduction="none").mean(dim=0)
            assert last["loss_early"] == pytest.approx(float(loss[early - 1]), abs=1e-5)
            assert last["loss_late"] == pytest.approx(float(loss[late - 1]), abs=1e-5)
            assert last["icl"] == pytest.approx(float(loss[late - 1] - loss[early - 1]),
                                                abs=1e-5)
            threshold = phase.CHANCE_MULTIPLE * found["chance"]["induction"]
            assert run["crossing_step"] == phase.crossing(run["records"], threshold)


def test_the_crossing_is_the_first_record_at_the_threshold():
    records = [{"step": s, "induction": [[a, b]]}
               for s, a, b in ((0, 0.1, 0.0), (50, 0.2, 0.49), (100, 0.5, 0.1), (150, 0.9, 0))]
    assert phase.crossing(records, 0.5) == 100
    assert phase.crossing(records, 0.49) == 50
    assert phase.crossing(records, 1.0) is None


def test_a_resumed_watcher_keeps_the_records_before_it(tmp_path):
    path = tmp_path / phase.PHASE_FILE
    path.write_text("".join(json.dumps({"step": s, "icl": s}) + "\n" for s in (0, 4, 8, 8)))
    assert [r["step"] for r in phase.read_records(path)] == [0, 4, 8]
    watcher = phase.PhaseWatcher(path, probe=None)
    watcher.open(total=12, initial=4)
    assert [r["step"] for r in phase.read_records(path)] == [0, 4]
    watcher.open(total=12, initial=0)
    assert phase.read_records(path) == []


def test_a_second_run_reuses_every_run(experiment, results, rerun):
    again = rerun(experiment, "phase")
    assert again.code == 0
    assert again.out.count("reusing the finished run") == 8 and "steps into" not in again.out
    assert "repeated random segments" in again.out and "final ICL score" in again.out
    assert all(r["reused"] for r in again.results["runs"].values())
    assert again.grid_after == again.grid_before and len(again.grid_after) == 2
    def without_data(tasks):  # the copy's data paths are its own
        return {task: {k: v for k, v in found.items() if k != "data"}
                for task, found in tasks.items()}

    assert without_data(again.results["tasks"]) == without_data(results["tasks"])
    # a run that decides nothing prints one line, within 100 columns, not its claims
    assert again.results["undecided_line"].startswith(
        "this --quick run is too small to decide anything: not met: the 2-layer models "
        "learned to copy the repeated segments (highest final training loss ")
    assert "the claims, judged" not in again.out
    assert " ".join(again.out.split()).count(again.results["undecided_line"]) == 1


def test_a_model_that_did_not_learn_decides_no_claim(experiment, results):
    # regression: 12 steps (loss flat at ln 64 = 4.16) printed "one-layer models never form
    # induction heads: held"; every claim reads heads, so every one waits for models that
    # learned: the 2-layer models' loss under three quarters of the bigram table's on the
    # segments, every model's under the bigram table's on text
    segments = results["tasks"]["segments"]["baselines"]["bigram"]
    assert segments == baselines.bigram_loss(load_data(experiment / "segments-data").train)
    worst = max(r["loss_curve"][-1][1] for r in results["tasks"]["segments"]["runs"].values()
                if r["layers"] == 2)
    assert worst > phase.COPIES * segments
    by_key = {c["key"]: c for c in results["claims"]}
    for key in ("one_layer_never", "two_layers_form", "phase_change", "icl_same_time"):
        assert by_key[key]["verdict"] == "undecided"
        assert by_key[key]["precondition"] == {
            "text": f"the 2-layer models learned to copy the repeated segments (highest final "
                    f"training loss {worst:.4g}, needs < {phase.COPIES * segments:.4g}: three "
                    f"quarters of a bigram table's loss)",
            "value": worst, "threshold": pytest.approx(phase.COPIES * segments), "met": False}
    text = by_key["natural_text"]["precondition"]
    assert text["met"] is False and text["threshold"] == \
        results["tasks"]["text"]["baselines"]["bigram"]
    assert by_key["natural_text"]["verdict"] == "undecided"


def test_models_that_learned_are_judged(results):
    # the same claims over models whose losses clear the bars: judged by the rule
    learned = json.loads(json.dumps(results))
    for task in learned["tasks"].values():
        for run in task["runs"].values():
            run["loss_curve"][-1][1] = 0.1
    judged = {c["key"]: c for c in evaluate(phase.CLAIMS, learned)}
    assert all(c["precondition"]["met"] for c in judged.values())
    assert judged["one_layer_never"]["verdict"] != "undecided"


def test_the_depth_line_compares_the_gap_with_the_seed_spread():
    def run(layers, icl, induction):
        return {"layers": layers, "final": {"icl": icl, "induction_max": induction}}

    results = {"tasks": {"t": {"runs": {"a": run(1, -0.5, 0.02), "b": run(1, -0.7, 0.03),
                                        "c": run(2, -2.8, 0.22), "d": run(2, -2.7, 0.04)}}}}
    line = phase.depth_line(results, "t")
    assert ("final ICL score: 1 layer -0.600, 2 layers -2.750 (seed means), a gap larger "
            "than the seed-to-seed spread (0.200)") in line
    assert ("best induction score: 1 layer +0.025, 2 layers +0.130 (seed means), a gap not "
            "larger than the seed-to-seed spread (0.180)") in line


def _made_run(seed, layers, induction, icl, crossing=None):
    """A hand-made run: its best induction score and ICL score at each record."""
    records = [{"step": 50 * i, "induction": [[0.0, v]], "icl": c}
               for i, (v, c) in enumerate(zip(induction, icl, strict=True))]
    return {"seed": seed, "layers": layers, "records": records, "crossing_step": crossing,
            "final": {"induction_max": induction[-1]},
            "loss_curve": [[0, 4.0], [50 * (len(records) - 1), 1.0]]}  # learned the task


def test_the_claims_on_hand_made_results():
    flat, slow = [0.02, 0.02, 0.021, 0.02], [-0.1, -0.2, -0.3, -0.4]
    jump = [0.02, 0.03, 0.30, 0.31]  # 0.27 of the whole 0.29 rise in one interval
    segments = {
        "a": _made_run(1337, 1, flat, slow), "b": _made_run(1338, 1, flat, slow),
        "c": _made_run(1337, 2, jump, [-0.4, -0.5, -2.5, -2.7], crossing=100),
        "d": _made_run(1338, 2, jump, [-0.4, -0.6, -2.4, -2.8], crossing=100)}
    text = {"e": _made_run(1337, 1, flat, slow), "f": _made_run(1338, 1, flat, slow),
            "g": _made_run(1337, 2, [0.02, 0.024], [0, -0.2]),
            "h": _made_run(1338, 2, [0.02, 0.025], [0, -0.2])}
    learned = {"bigram": 4.0}  # the runs end at 1.0: every precondition met
    results = {"chance_multiple": 5.0,
               "tasks": {"segments": {"chance": {"induction": 0.02}, "runs": segments,
                                      "baselines": learned},
                         "text": {"chance": {"induction": 0.02}, "runs": text,
                                  "baselines": learned}}}
    judged = {c["key"]: c for c in evaluate(phase.CLAIMS, results)}
    assert {k: c["verdict"] for k, c in judged.items()} == {
        "one_layer_never": "held", "two_layers_form": "held", "phase_change": "held",
        "icl_same_time": "held", "natural_text": "not seen"}
    assert judged["one_layer_never"]["effects"] == pytest.approx([5 - 1.05, 5 - 1.05])
    assert judged["phase_change"]["effects"] == pytest.approx([0.27 / 0.29 - 0.5] * 2)
    # (ICL before the crossing - after it) / its whole fall
    assert judged["icl_same_time"]["effects"] == pytest.approx([2.2 / 2.3 - 0.5,
                                                                2.2 / 2.4 - 0.5])
    segments["c"]["crossing_step"] = None  # no crossing: no "at the same time"
    assert evaluate(phase.CLAIMS, results)[3]["verdict"] == "undecided"
