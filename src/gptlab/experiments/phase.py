"""`gptlab experiment phase`: the induction-head phase change (Olsson et al. 2022, "In-context
Learning and Induction Heads"), watched as it happens.

Attention-only models (mlp "none") of one and two layers are trained, three seeds each, on the
repeated-random-segments task (gptlab.data.synthetic: the next symbol can only be read off an
earlier copy) and on text (the embedded Shakespeare, or --data). At every evaluation during
training a watcher records, on fixed probes:

- each head's previous-token and induction scores (gptlab.interp.heads.head_scores) on
  random tokens repeated twice (the standard induction probe), beside the chance level (a
  head that attends uniformly: chance_scores);
- the in-context-learning score: the mean loss at a late token of the context minus the
  mean loss at an early one (Olsson et al.: the 500th token minus the 50th; here token
  LATE = block_size - 1 minus token EARLY = block_size // 10), on held-out windows of the
  run's own data.

The report gives the step (and tokens seen) at which a model's best induction score first
reaches 5x chance, or that it never does (Olsson et al.: one-layer attention-only models
never form induction heads; two-layer ones do, in a sudden phase change visible as a bump
in the loss curve).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from gptlab.data.prepared import load_data
from gptlab.data.synthetic import ensure_repeated_segments
from gptlab.experiments import report
from gptlab.experiments.baselines import text_baselines
from gptlab.experiments.claims import Claim, Measured, Precondition
from gptlab.experiments.contract import Experiment
from gptlab.experiments.grid import Grid, RunRecord, RunSpec, choose_size, open_experiment
from gptlab.experiments.units import by_seed, effects_text, measured_over, per_unit, seed_list
from gptlab.files.atomic import atomic_write_text
from gptlab.interp.heads import chance_scores, head_scores, per_token_loss, repeated_random_tokens
from gptlab.model.config import GPTConfig
from gptlab.model_dir import load_config
from gptlab.plots.heads import phase_curves
from gptlab.training.config import recipe
from gptlab.training.reporting import Reporter
from gptlab.training.rundir import read_metrics

NAME = "phase"
RECIPE = "shakespeare-char-cpu-fast"
TASKS = ("segments", "text")  # the repeated-segments task, then text (Shakespeare or --data)
LAYERS = (1, 2)
PHASE_FILE = "phase.jsonl"  # the watcher's records, in each run's directory
CHANCE_MULTIPLE = 5.0
PROBE_SEED = 0  # the probes' tokens and windows never change with the training seed
LABELS = {"segments": "repeated random segments", "text": "text"}
TITLE = "The induction-head phase change"
FIGURE_NAME = "phase-{}.png"  # one figure per task
FIGURES = tuple(FIGURE_NAME.format(task) for task in TASKS)


@dataclass(frozen=True)
class Size:
    name: str
    model: dict[str, Any]  # GPTConfig fields besides n_layer (and vocab_size)
    steps: int
    batch_size: int
    seeds: int
    eval_every: int  # steps between the watcher's records
    segments_chars: int  # length of the synthetic task's text
    probe_batch: int  # repeated-random-token sequences in the induction probe
    icl_windows: int  # held-out windows the in-context-learning score averages over
    learning_rate: float = 2e-3
    warmup: int = 50
    eval_iters: int = 4


SIZES = {
    "default": Size("default", dict(block_size=64, n_head=4, n_embd=64, pos_encoding="rope",
                                    mlp="none", bias=False, dropout=0.0),
                    steps=1500, batch_size=32, seeds=3, eval_every=50,
                    segments_chars=2_000_000, probe_batch=16, icl_windows=64),
    "quick": Size("quick", dict(block_size=32, n_head=2, n_embd=16, pos_encoding="rope",
                                mlp="none", bias=False, dropout=0.0),
                  steps=12, batch_size=4, seeds=2, eval_every=4, segments_chars=20_000,
                  probe_batch=2, icl_windows=4, warmup=2, eval_iters=1),
}


def run_phase(out: str | Path, data: str | Path | None = None, quick: bool = False,
              seed: int = 1337, steps: int | None = None, progress: bool = False,
              log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train (or reuse) the grid in `out` with the watcher on, read what it recorded, write
    results.json, report.md and the figures there; returns the results. data: a prepared
    data directory for the text task (default: the embedded Shakespeare, in OUT/data)."""
    size = choose_size(SIZES, quick, steps=steps)
    timer = report.Timer()
    folder, text_dir = open_experiment(out, NAME, data, log)
    segments_dir = folder / "segments-data"
    meta, reused = ensure_repeated_segments(segments_dir, size.segments_chars, PROBE_SEED,
                                            by="experiment")
    if not reused:
        log(f"prepared the repeated-segments task ({meta['train_tokens'] + meta['val_tokens']:,}"
            f" characters) in {segments_dir}/")
    data_dirs = {"segments": segments_dir, "text": text_dir}
    records: dict[str, RunRecord] = {}
    tasks = {}
    for task, data_dir in data_dirs.items():
        probe = Probe.build(data_dir, size)
        grid = Grid(folder, data_dir, state=f"grid-{task}.json")
        found = grid.train(specs(size, seed, task, probe), progress, log)
        records.update(found)
        # the data by its folder's name: where it was built says nothing on another machine
        tasks[task] = {"data": Path(data_dir).name, "chance": probe.chance,
                       "baselines": text_baselines(load_data(data_dir).train,
                                                   probe.vocab_size),
                       "runs": {name: summarize(grid.run_dir(name), r, size, probe)
                                for name, r in found.items()}}
    timer.add("train_s", sum(r.train_s for r in records.values() if not r.reused))
    results = {
        "experiment": NAME, "size": size.name, "model": size.model, "layers": list(LAYERS),
        "recipe": RECIPE, "steps": size.steps, "batch_size": size.batch_size,
        "learning_rate": size.learning_rate, "warmup": size.warmup,
        "eval_every": size.eval_every, "chance_multiple": CHANCE_MULTIPLE,
        "icl_positions": list(icl_positions(size.model["block_size"])),
        "probe": {"seed": PROBE_SEED, "batch": size.probe_batch,
                  "seq_len": size.model["block_size"] // 2, "icl_windows": size.icl_windows},
        "runs": {name: r.to_dict(folder) for name, r in records.items()},
        "tasks": tasks,
        "training_time_s": round(sum(r.train_s for r in records.values()), 1),
    }
    t0 = time.perf_counter()
    for task in tasks:
        figure(results, task).save(folder / figure_name(task))
    timer.add("report_s", time.perf_counter() - t0)
    return report.finish(folder, results, records, timer, TITLE,
                         lambda done: sections(done, records), CLAIMS)


def icl_positions(block: int) -> tuple[int, int]:
    """(early, late) token positions of the in-context-learning score."""
    return block // 10, block - 1


def specs(size: Size, seed: int, task: str, probe: Probe) -> list[RunSpec]:
    """A run per depth and seed, named TASK-L{layers}-seed-S, each watched by the probe."""
    out = []
    for layers in LAYERS:
        for s in seed_list(seed, size.seeds):
            train = recipe(RECIPE, max_iters=size.steps, batch_size=size.batch_size, seed=s,
                           learning_rate=size.learning_rate, min_lr=size.learning_rate / 10,
                           warmup_iters=size.warmup, eval_interval=size.eval_every,
                           eval_iters=size.eval_iters, log_interval=max(1, size.eval_every // 5),
                           whole_val=False, dtype="float32")
            model = GPTConfig(vocab_size=probe.vocab_size, n_layer=layers, **size.model)
            out.append(RunSpec(f"{task}-L{layers}-seed-{s}", model, train,
                               watcher=lambda run_dir: PhaseWatcher(run_dir / PHASE_FILE,
                                                                    probe)))
    return out


@dataclass
class Probe:
    """The fixed inputs every record is measured on: repeated random tokens (induction and
    previous-token scores) and held-out windows of the data (the in-context-learning
    score)."""

    tokens: torch.Tensor  # (probe_batch, block): seq_len random ids, then the same again
    windows: torch.Tensor  # (icl_windows, block) from the start of the validation split
    vocab_size: int
    block: int
    chance: dict[str, float]

    @classmethod
    def build(cls, data_dir: Path, size: Size) -> Probe:
        data = load_data(data_dir)
        block = size.model["block_size"]
        tokens = repeated_random_tokens(data.vocab_size, block // 2, size.probe_batch,
                                        torch.Generator().manual_seed(PROBE_SEED))
        val = data.val[:size.icl_windows * block].astype("int64")
        windows = torch.as_tensor(val).view(size.icl_windows, block)
        return cls(tokens, windows, data.vocab_size, block, chance_scores(tokens))

    def measure(self, model: nn.Module) -> dict[str, Any]:
        """Every head's scores and the in-context-learning score of the model as it is."""
        scores = head_scores(model, self.tokens)
        losses = per_token_loss(model, self.windows).mean(dim=0)  # entry t predicts t+1
        early, late = icl_positions(self.block)
        return {"previous_token": scores["previous_token"].tolist(),
                "induction": scores["induction"].tolist(),
                "loss_early": float(losses[early - 1]), "loss_late": float(losses[late - 1]),
                "icl": float(losses[late - 1] - losses[early - 1])}


class PhaseWatcher(Reporter):
    """At each evaluation, the probe's measurements of the model, a line of `path`. A
    fresh run starts the file afresh; a resumed one keeps the lines up to where it
    resumes."""

    def __init__(self, path: Path, probe: Probe) -> None:
        self.path, self.probe = path, probe

    def open(self, total: int, initial: int) -> None:
        kept = [r for r in read_records(self.path) if r["step"] <= initial] if initial else []
        atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in kept))

    def evaluation(self, record: dict[str, Any], model: nn.Module, improved: bool) -> None:
        line = {"step": record["step"], **self.probe.measure(model)}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


def read_records(path: Path) -> list[dict[str, Any]]:
    """The watcher's records, one per step (a step recorded twice, by a run resumed after
    it: the last)."""
    if not path.is_file():
        return []
    by_step = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            by_step[r["step"]] = r
    return [by_step[s] for s in sorted(by_step)]


def crossing(records: list[dict[str, Any]], threshold: float) -> int | None:
    """The first recorded step at which some head's induction score reaches threshold."""
    return next((r["step"] for r in records
                 if max(max(row) for row in r["induction"]) >= threshold), None)


def summarize(run_dir: Path, record: RunRecord, size: Size, probe: Probe) -> dict[str, Any]:
    """One run: its watcher's records, its loss curve, and the crossing step."""
    phase = read_records(run_dir / PHASE_FILE)
    metrics = read_metrics(run_dir)
    curve = [(m["step"], m["loss"]) for m in metrics if "loss" in m and "step" in m
             and "val_loss" not in m and isinstance(m["loss"], float)]
    threshold = CHANCE_MULTIPLE * probe.chance["induction"]
    step = crossing(phase, threshold)
    final = phase[-1] if phase else None
    return {"seed": record.seed, "layers": load_config(run_dir).n_layer, "records": phase,
            "loss_curve": curve,
            "crossing_step": step,
            "crossing_tokens": None if step is None else step * size.batch_size * probe.block,
            "final": None if final is None else {
                "induction_max": max(max(row) for row in final["induction"]),
                "previous_token_max": max(max(row) for row in final["previous_token"]),
                "icl": final["icl"], "loss_early": final["loss_early"],
                "loss_late": final["loss_late"]}}


# ----------------------------------------------------------------------------- claims


def _best(record: dict[str, Any], key: str = "induction") -> float:
    return max(max(row) for row in record[key])


def _runs(results: dict[str, Any], task: str, layers: int) -> list[dict[str, Any]]:
    """The task's runs of one depth, in seed order."""
    return by_seed(r for r in results["tasks"][task]["runs"].values() if r["layers"] == layers)


def _copiers(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The 2-layer models on repeated segments, in seed order: where the claims look for
    the induction heads to form."""
    return _runs(results, "segments", 2)


def _over_chance(results: dict[str, Any], task: str) -> float:
    return results["tasks"][task]["chance"]["induction"]


def _never(results: dict[str, Any]) -> Measured:
    """5 (the crossing's multiple) minus the 1-layer models' highest best induction score
    at any record, in multiples of chance (segments)."""
    chance = _over_chance(results, "segments")
    return per_unit(_runs(results, "segments", 1),
                    lambda r: results["chance_multiple"]
                    - max(_best(x) for x in r["records"]) / chance,
                    "1 layer, repeated segments: 5 - highest best induction / chance: {}",
                    digits="+.2f")


def _forms(results: dict[str, Any]) -> Measured:
    chance = _over_chance(results, "segments")
    return per_unit(_copiers(results),
                    lambda r: r["final"]["induction_max"] / chance - results["chance_multiple"],
                    "2 layers, repeated segments: final best induction / chance - 5: {}",
                    digits="+.2f")


def _abrupt(run: dict[str, Any]) -> float | None:
    """The largest rise of the best induction score between two records, as a share of its
    whole rise (first record to highest), minus one half; None without a rise."""
    scores = [_best(x) for x in run["records"]]
    rise = max(scores) - scores[0]
    if len(scores) < 2 or rise <= 0:
        return None
    return max(b - a for a, b in zip(scores, scores[1:], strict=False)) / rise - 0.5


def _icl_with_it(run: dict[str, Any]) -> float | None:
    """The share of the ICL score's whole fall (first record to lowest) that happens from
    the record before the crossing to the one after it (two intervals), minus one half;
    None without a crossing or a fall."""
    steps = [x["step"] for x in run["records"]]
    icl = [x["icl"] for x in run["records"]]
    if run["crossing_step"] is None or icl[0] - min(icl) <= 0:
        return None
    i = steps.index(run["crossing_step"])
    before, after = icl[max(0, i - 1)], icl[min(len(icl) - 1, i + 1)]
    return (before - after) / (icl[0] - min(icl)) - 0.5


def _text_depth(results: dict[str, Any]) -> Measured:
    """On text, per seed: 2 layers' final best induction minus 1 layer's, in chance units."""
    chance = _over_chance(results, "text")
    one, two = _runs(results, "text", 1), _runs(results, "text", 2)
    effects = [(b["final"]["induction_max"] - a["final"]["induction_max"]) / chance
               for a, b in zip(one, two, strict=True)]
    return Measured([r["seed"] for r in two], effects,
                    "text: 2 layers - 1 layer final best induction / chance: "
                    + effects_text(effects, "+.2f"))


def _final_loss(results: dict[str, Any], task: str, layers: tuple[int, ...]) -> float:
    """The highest final training loss of the task's runs of those depths (the last point
    of each loss curve)."""
    return max(r["loss_curve"][-1][1] for n in layers for r in _runs(results, task, n))


# The preconditions: every claim reads the heads of trained models, so the models must have
# learned their task. On repeated segments the symbols' bigrams are uniform, so a model
# that cannot copy stays near the bigram table's loss (ln 64 = 4.16; the 1-layer models end
# at 3.76-3.82 at the default size): the 2-layer models learned to copy when their loss is
# under three quarters of it (they end at 2.2-2.3). On text, every model must read its
# context: a loss under the bigram table's, which the current token's embedding alone gets.
COPIES = 0.75
COPIED = Precondition(
    "the 2-layer models learned to copy the repeated segments", "highest final training loss",
    lambda r: _final_loss(r, "segments", (2,)),
    lambda r: COPIES * r["tasks"]["segments"]["baselines"]["bigram"], below=True,
    why="three quarters of a bigram table's loss")
READ_TEXT = Precondition(
    "every text model reads its context", "highest final training loss",
    lambda r: _final_loss(r, "text", LAYERS),
    lambda r: r["tasks"]["text"]["baselines"]["bigram"], below=True,
    why="a bigram table's loss")

# Thresholds: induction is counted in multiples of chance (a head attending uniformly),
# the experiment's crossing at 5x (CHANCE_MULTIPLE); "abrupt" and "at the same time" mean
# more than half of the whole rise (fall) within one (two) of the watcher's 50-step
# intervals; on text a depth difference counts from one chance unit.
CLAIMS = (
    Claim("one_layer_never",
          "one-layer attention-only models never form induction heads",
          "never (Olsson et al.)",
          "5 minus the 1-layer models' highest best induction score over training, in "
          "multiples of chance (repeated segments)",
          _never, direction=1, smallest=0.0, precondition=COPIED),
    Claim("two_layers_form",
          "two-layer models form induction heads (repeated segments)",
          "they do (Olsson et al.)",
          "the 2-layer models' final best induction score in multiples of chance, minus 5",
          _forms, direction=1, smallest=0.0, precondition=COPIED),
    Claim("phase_change",
          "they form in a phase change (repeated segments)",
          "abrupt and early, a bump in the loss (Olsson et al.)",
          "the largest rise of the best induction score in one 50-step interval, as a share "
          "of its whole rise, minus one half",
          measured_over(_copiers, _abrupt,
                        "2 layers: largest one-interval share of the rise - 0.5: {}",
                        digits="+.2f"),
          direction=1, smallest=0.0, precondition=COPIED),
    Claim("icl_same_time",
          "in-context learning improves at the same time (repeated segments)",
          "the ICL score drops at the phase change (Olsson et al.)",
          "the share of the ICL score's whole fall around the crossing (the record before to "
          "the one after), minus one half",
          measured_over(_copiers, _icl_with_it,
                        "2 layers: share of the ICL fall around the crossing - 0.5: {}",
                        digits="+.2f"),
          direction=1, smallest=0.0, precondition=COPIED),
    Claim("natural_text",
          "the same on natural text: two layers form induction heads, one does not",
          "on natural text, after a few billion tokens (Olsson et al.)",
          "2 layers' minus 1 layer's final best induction score on text, in multiples of "
          "chance",
          _text_depth, direction=1, smallest=1.0, precondition=READ_TEXT),
)


# ----------------------------------------------------------------------------- writing


def figure_name(task: str) -> str:
    return FIGURE_NAME.format(task)


def table(results: dict[str, Any], task: str) -> tuple[list[str], list[list[str]]]:
    """A row per run of the task: depth, seed, the crossing, the final scores."""
    chance = results["tasks"][task]["chance"]
    header = ["run", f"reaches {results['chance_multiple']:g}x chance induction at step "
                     f"(tokens)", "final best induction", "final best previous-token",
              "final ICL score", "loss early / late"]
    rows = []
    for name, run in results["tasks"][task]["runs"].items():
        f = run["final"]
        cross = ("never" if run["crossing_step"] is None
                 else f"{run['crossing_step']} ({run['crossing_tokens']:,})")
        rows.append([name, cross,
                     f"{f['induction_max']:.2f} ({f['induction_max'] / chance['induction']:.0f}x)",
                     f"{f['previous_token_max']:.2f} "
                     f"({f['previous_token_max'] / chance['previous_token']:.0f}x)",
                     f"{f['icl']:+.3f}", f"{f['loss_early']:.3f} / {f['loss_late']:.3f}"])
    return header, rows


def depth_line(results: dict[str, Any], task: str) -> str:
    """Whether 1 and 2 layers differ by more than the seeds do, in the final ICL score and
    the final best induction score."""
    runs = results["tasks"][task]["runs"].values()
    parts = []
    for key, label in (("icl", "ICL score"), ("induction_max", "best induction score")):
        by_depth = {n: [r["final"][key] for r in runs if r["layers"] == n] for n in LAYERS}
        means = {n: sum(v) / len(v) for n, v in by_depth.items()}
        spread = max(max(v) - min(v) for v in by_depth.values())
        gap = abs(means[LAYERS[-1]] - means[LAYERS[0]])
        verdict = "larger" if gap > spread else "not larger"
        parts.append(f"final {label}: {LAYERS[0]} layer {means[LAYERS[0]]:+.3f}, "
                     f"{LAYERS[-1]} layers {means[LAYERS[-1]]:+.3f} (seed means), a gap "
                     f"{verdict} than the seed-to-seed spread ({spread:.3f})")
    return "; ".join(parts)


def chance_line(results: dict[str, Any], task: str) -> str:
    chance = results["tasks"][task]["chance"]
    return (f"chance (a head attending uniformly): induction {chance['induction']:.3f}, "
            f"previous-token {chance['previous_token']:.3f}")


def tables(results: dict[str, Any]) -> list[tuple[str, tuple[list[str], list[list[str]]]]]:
    """The tables the command prints and the lab shows: one per task."""
    early, late = results["icl_positions"]
    return [(f"{LABELS[task]} ({results['tasks'][task]['data']}); ICL score = loss at token "
             f"{late} - loss at token {early}:", table(results, task))
            for task in results["tasks"]]


def notes(results: dict[str, Any]) -> list[str]:
    """What the command prints after the tables: each task's crossing and depth lines."""
    return [line for task in results["tasks"]
            for line in (chance_line(results, task), depth_line(results, task))]


def figure(results: dict[str, Any], task: str) -> Any:
    runs = results["tasks"][task]["runs"]
    series = {name: {"loss": run["loss_curve"],
                     "induction": [(r["step"], max(max(row) for row in r["induction"]))
                                   for r in run["records"]],
                     "previous_token": [(r["step"], max(max(row) for row in r["previous_token"]))
                                        for r in run["records"]],
                     "icl": [(r["step"], r["icl"]) for r in run["records"]],
                     "crossing": run["crossing_step"], "layers": run["layers"]}
              for name, run in runs.items()}
    chance = results["tasks"][task]["chance"]
    return phase_curves(series, threshold=results["chance_multiple"] * chance["induction"],
                        title=f"{LABELS[task]}: attention-only models of 1 and 2 layers")


def sections(results: dict[str, Any], records: dict[str, RunRecord]) -> list[tuple[str, str]]:
    m, probe = results["model"], results["probe"]
    early, late = results["icl_positions"]
    setup = (
        f"Size `{results['size']}`: attention-only models (mlp none) of 1 and 2 layers, "
        f"{m['n_head']} heads, width {m['n_embd']}, {m['pos_encoding']} positions, block "
        f"{m['block_size']}; {results['steps']} steps of batch {results['batch_size']} "
        f"(learning rate {results['learning_rate']:g}, {results['warmup']} warm-up steps, "
        f"then the recipe's cosine decay); {report.seeds_line(records)}. Every "
        f"{results['eval_every']} steps: each head's previous-token and induction scores on "
        f"{probe['batch']} sequences of {probe['seq_len']} random tokens repeated twice "
        f"(seed {probe['seed']}), and the in-context-learning score, loss at token {late} "
        f"minus loss at token {early}, averaged over the first {probe['icl_windows']} "
        f"windows of the validation split. A model 'reaches {results['chance_multiple']:g}x "
        f"chance' at the first recorded step where its best head's induction score is "
        f"{results['chance_multiple']:g} times a uniform head's.")
    out = [("Setup", setup)]
    for task in results["tasks"]:
        header, rows = table(results, task)
        out.append((f"{LABELS[task]} (`{results['tasks'][task]['data']}`)",
                    report.markdown_table(header, rows) + "\n\n" + chance_line(results, task)
                    + ".\n\n" + depth_line(results, task) + "."
                    + f"\n\n![{task}]({figure_name(task)})"))
    out.append(("Time", report.timing_line(results["timing"], results["machine"])
                + f". Training took {results['training_time_s']:.0f} s when it was trained."))
    return out


EXPERIMENT = Experiment(name=NAME, title=TITLE, figures=FIGURES, sizes=SIZES,
                        units=("seeds",), run=run_phase, tables=tables, notes=notes,
                        claims=CLAIMS)
