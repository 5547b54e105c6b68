"""The benchmarks run end to end at tiny sizes and write valid results. Correctness only:
no timing is asserted (the smoke numbers mean nothing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from bench.common import interleaved, table
from bench.generation import weight_bytes_per_token
from bench.run import main  # python -m bench
from bench.scaling import fit_line

from bench import run as bench_run
from gptlab import GPT, GPTConfig

ROOT = Path(__file__).resolve().parents[2]


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# The tests that read the smoke run of every benchmark (half a minute, two trainings
# included) are in the slow tier.
smoke_run = pytest.mark.slow


@pytest.fixture(scope="module")
def smoke_results(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench")
    assert main(["--smoke", "--out", str(out)]) == 0
    return out


def load(out: Path, name: str) -> dict:
    data = json.loads((out / f"{name}.json").read_text())
    assert data["benchmark"] == name
    assert data["machine"]["torch_threads"] == 2
    assert data["size"] == "smoke"
    return data


@smoke_run
def test_train_step_compares_against_transformers(smoke_results):
    data = load(smoke_results, "train_step")
    rows = data["shapes"][0]["rows"]
    peer = rows[0]
    assert peer["contender"] == data["shapes"][0]["peer"] and peer["speedup_vs_peer"] == 1.0
    for r in rows:
        assert r["ms_per_step"] > 0 and len(r["times_s"]) == 2
        shape = data["shapes"][0]
        assert r["tokens_per_s"] == pytest.approx(
            shape["batch_size"] * shape["seq_len"] / r["ms_per_step"] * 1e3)


@smoke_run
def test_generation_matches_transformers_tokens(smoke_results):
    data = load(smoke_results, "generation")
    assert {(r["who"], r["dtype"], r["batch_size"]) for r in data["rows"]} == {
        (w, d, b) for w in ("gptlab", "transformers") for d in ("fp32", "bf16") for b in (1, 2)}
    fp32 = [r for r in data["rows"] if r["dtype"] == "fp32"]
    # Same weights (converted with gptlab.convert.hf), greedy: the same tokens in fp32.
    assert all(r["greedy_tokens_agree"] == 1.0 for r in fp32)
    assert data["bandwidth_bytes_per_s"] > 0
    lat = data["latency"]
    assert len(lat["cached_s_per_token"]) == 8
    assert len(lat["uncached_lengths"]) == len(lat["uncached_s_per_token"])
    assert (smoke_results / data["plot"]).read_bytes()[:8] == PNG_MAGIC


@smoke_run
def test_generation_times_every_weight_format(smoke_results):
    rows = load(smoke_results, "generation")["weight_formats"]
    assert [r["weights"] for r in rows] == ["plain fp32", "fp32", "fp16", "bf16", "int8", "auto"]
    assert rows[0]["x_plain_fp32"] == 1.0 and rows[0]["greedy_tokens_agree"] == 1.0
    for r in rows[1:]:
        assert r["kernel"].split("/")[0] == r["weights"] or r["weights"] == "auto"
        assert r["tokens_per_s"] > 0 and r["share_of_floor"] > 0
    assert rows[4]["weight_bytes_per_step"] < rows[2]["weight_bytes_per_step"] \
        < rows[1]["weight_bytes_per_step"]


@smoke_run
def test_mfu_uses_measured_peak(smoke_results):
    data = load(smoke_results, "mfu")
    for r in data["rows"]:
        assert r["peak_flops_per_s"] == data["matmul"]["peak_flops_per_s"][r["dtype"]]
        assert r["mfu"] == pytest.approx(r["achieved_flops_per_s"] / r["peak_flops_per_s"])
        assert r["achieved_flops_per_s"] == pytest.approx(
            r["flops_per_step"] / (r["ms_per_step"] / 1e3))


@smoke_run
def test_scaling_writes_fit_and_plot(smoke_results):
    data = load(smoke_results, "scaling")
    w = data["widths"][0]
    assert [p["context"] for p in w["points"]] == [16, 32, 64]
    assert all(p["batch_size"] * p["context"] == data["tokens_per_step"] for p in w["points"])
    # attention's share of FLOPs grows with the context
    shares = [p["attention_flop_share"] for p in w["points"]]
    assert shares == sorted(shares) and 0 < shares[0] < shares[-1] < 1
    assert (smoke_results / data["plot"]).read_bytes()[:8] == PNG_MAGIC


@smoke_run
def test_time_to_quality_trains_both_recipes(smoke_results):
    data = load(smoke_results, "time_to_quality")
    recipes = data["recipes"]
    assert len(recipes) == 2 and data["peer"] in recipes
    for r in recipes.values():
        assert r["reached"] and r["final_val_loss"] <= data["target_val_loss"]
        assert r["curve"][-1]["val_loss"] == r["final_val_loss"]
        assert r["train_s"] > 0 and r["steps"] == r["curve"][-1]["step"]


@smoke_run
def test_cli_startup_times_help_against_import_torch(smoke_results):
    data = load(smoke_results, "cli_startup")
    assert set(data["median_s"]) == {"gptlab --help", "import torch", "python"}
    assert all(len(ts) == 2 for ts in data["times_s"].values())
    assert data["ratio_help_vs_import_torch"] == pytest.approx(
        data["median_s"]["gptlab --help"] / data["median_s"]["import torch"])
    assert data["within_target"] == (data["ratio_help_vs_import_torch"] <= data["target_ratio"])


def test_unknown_benchmark_is_one_line_usage_error(capsys):
    assert main(["--only", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown benchmark 'nope'" in err and "\n" not in err


@pytest.mark.parametrize("argv, message", [
    (["--threads", "0"], "--threads: must be between 1 and 1024, got 0"),
    (["--threads", str(10**6)], "--threads: must be between 1 and 1024"),  # segfaulted at exit
    (["--threads", str(2**70)], "--threads: must be between 1 and 1024"),
    (["--out", "{file}"], "exists and is not a directory"),
    (["--out", "{file}/sub"], "is a file"),
])
def test_bad_options_are_refused_before_any_benchmark(tmp_path, capsys, monkeypatch, argv,
                                                      message):
    def no_runner(*args, **kwargs):
        raise AssertionError("a benchmark ran before the options were checked")

    monkeypatch.setattr(bench_run, "run_all", no_runner)
    (tmp_path / "f").write_text("x")
    argv = [a.replace("{file}", str(tmp_path / "f")) for a in argv]
    assert main(["--smoke", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_only_accepts_every_benchmark_in_the_folder():
    modules = {p.stem for p in (ROOT / "bench").glob("*.py")}
    assert set(bench_run.BENCHMARKS) <= modules
    assert bench_run.parse_only(["lab_latency,mfu"]) == ["lab_latency", "mfu"]
    assert bench_run.selected(["mfu", "train_step"], "full") == ["train_step", "mfu"]
    assert "time_to_quality" not in bench_run.selected(None, "quick")


@pytest.mark.slow  # seconds (a process, a timed-out body, 30 runs): make test, not make check
def test_python_m_bench_answers_help_and_refuses_bad_usage_in_one_line():
    """`python -m bench` from the checkout, as `make bench` runs it: --help, then a bad
    flag (exit 2, one line, no traceback)."""
    run = [sys.executable, "-m", "bench"]
    shown = subprocess.run([*run, "--help"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: python -m bench")
    assert "--smoke" in shown.stdout and "--threads" in shown.stdout
    bad = subprocess.run([*run, "--only", "nope"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.startswith("python -m bench: error: unknown benchmark 'nope'")
    assert bad.stderr.count("\n") == 1


def test_time_to_quality_missing_text_is_usage_error(tmp_path, capsys):
    code = main(["--only", "time_to_quality", "--text", str(tmp_path / "no.txt"),
                 "--out", str(tmp_path)])
    assert code == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.slow  # several processes: the FSDP smoke run is a torchrun launch
def test_gpu_script_dry_run(tmp_path):
    proc = subprocess.run([str(ROOT / "bench" / "gpu.sh"), "--dry-run", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "gpu.json").read_text())
    assert data["dry_run"] and data["train"]["tokens_per_s"] > 0
    assert data["train"]["mfu"] == pytest.approx(
        data["train"]["achieved_flops_per_s"] / data["bf16_matmul_peak_flops_per_s"])
    assert [r["batch_size"] for r in data["generation"]] == [1, 2]
    assert data["fsdp_smoke"]["ok"], data["fsdp_smoke"]  # --parallel fsdp learned


def test_interleaved_alternates_order():
    calls = []
    times = interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                        reps=3, warmup=1)
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b"]
    assert {k: len(v) for k, v in times.items()} == {"a": 3, "b": 3}


def test_fit_line_recovers_line():
    a, b = fit_line([64, 128, 256, 512], [3 + 0.5 * t for t in (64, 128, 256, 512)])
    assert a == pytest.approx(3) and b == pytest.approx(0.5)


def test_weight_bytes_per_token_gpt2():
    # GPT-2 small: 124,439,808 parameters; of the 1024 x 768 position table one row is read.
    with torch.device("meta"):
        model = GPT(GPTConfig.from_preset("gpt2"))
    assert weight_bytes_per_token(model) == (124_439_808 - 1023 * 768) * 4


def test_weight_bytes_of_a_quantized_model():
    """int8 matrices: a byte each plus a bf16 scale per row; the fp32 embedding is then
    read a row per token, since the int8 head is its own copy."""
    from gptlab.inference import quantize

    config = GPTConfig.from_preset("tiny-gpt2")
    model = GPT(config)
    before = weight_bytes_per_token(model)
    quantize._swap(model, "int8/bf16_input")
    V, C, L, F = config.vocab_size, config.n_embd, config.n_layer, config.ffn_hidden
    matrices = L * (C * 3 * C + C * C + C * F + F * C) + V * C
    rows = L * (3 * C + C + F + C) + V  # one scale each
    biases = L * (3 * C + C + F + C)
    norms = (2 * L + 1) * 2 * C
    positions, embedding = C, C  # one row of each
    assert weight_bytes_per_token(model) == matrices + 2 * rows + 4 * (
        biases + norms + positions + embedding)
    assert weight_bytes_per_token(model) < before / 3


def test_table_aligns_columns():
    lines = table(["name", "x"], [["a", 1.5], ["bbb", 1234.0]]).splitlines()
    assert len({len(line.rstrip()) for line in lines[1:]}) == 1
    assert lines[3].endswith("1,234")


@smoke_run
def test_lab_latency_times_every_endpoint(smoke_results):
    data = json.loads((smoke_results / "lab_latency.json").read_text())
    from bench.lab_latency import CALLS

    assert [(r["endpoint"], r["run"]) for r in data["endpoints"]] == \
        [(path, body.get("run", "-")) for path, body in CALLS]
    assert all(0 < r["median_ms"] <= r["max_ms"] for r in data["endpoints"])
    assert data["all_within_budget"] == all(r["median_ms"] < 100 for r in data["endpoints"])
