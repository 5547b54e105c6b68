"""What the whole suite shares: the environment every test runs in, and the small data,
models and runs that tests in more than one folder build on. A folder's own conftest.py
holds what only its tests share; no test module imports another.

Two tiers (pyproject.toml registers the markers): `make check` runs `pytest -m "not slow"`,
the edit loop; `make test` runs everything, as CI does."""

from __future__ import annotations

import atexit
import builtins
import contextlib
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

# No test may depend on a timing probe (gptlab.probe) or write into the user's cache: what
# `--dtype auto` means is fixed, no probe runs (a quiet machine would time and announce
# one, a busy one not: output would follow the load) unless a test of probing asks for it
# (the `probing` fixture), and probes.json and downloads go to a fresh directory.
os.environ["GPTLAB_AUTO_DTYPE"] = "float32"
os.environ["GPTLAB_PROBE"] = "off"
os.environ["GPTLAB_CACHE"] = tempfile.mkdtemp(prefix="gptlab-test-cache-")
atexit.register(shutil.rmtree, os.environ["GPTLAB_CACHE"], ignore_errors=True)

# Ctrl-C as a user's terminal delivers it, however the suite was started: a shell's
# background job (`make test &`, nohup) starts with SIGINT ignored, which every process a
# test starts would inherit, and gptlab keeps an ignored SIGINT ignored (gptlab.stopping).
# Tests of that case set it up themselves.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Under pytest-xdist (make check/test: one worker per core) each worker, and every process
# a test starts, gets its share of the cores, not torch's default of all of them: two
# workers at two OpenMP threads each on two cores spent their time waiting for each other
# (six heavy test files: 370 s -> 231 s wall, 650 -> 397 s CPU). A count the user set stays.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1 and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // _WORKERS))
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.hookimpl(trylast=True)  # after every marker is on (notebooks/conftest.py adds theirs)
def pytest_collection_modifyitems(items):
    """The files that hold slow tests first, each file's tests in their order: make test's
    `--dist loadfile --no-loadscope-reorder` hands each worker the next file in this order,
    so the long files start early and the many short ones fill the end. xdist's own order
    (the most tests first) left a long file for last, one worker running it alone."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


ASSETS = Path(__file__).parent / "assets"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# ----------------------------------------------------------------------------- environment


@contextlib.contextmanager
def _torch_threads(n: int):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def one_thread():
    """Tiny models: one thread is as fast, and two threads on a busy 2-core machine
    spin-wait for each other (100x slower). Restored afterwards for other tests."""
    with _torch_threads(1):
        yield


@pytest.fixture(scope="module")
def one_thread_module():
    """one_thread for a whole module, module fixtures included (they are set up before any
    function fixture): what the module computes once is computed as its tests compute."""
    with _torch_threads(1):
        yield


@pytest.fixture
def without_transformers(monkeypatch):
    """Make `import transformers` fail, as on an install without the `gptlab[hf]` extra."""
    real_import = builtins.__import__

    def no_transformers(name, *args, **kwargs):
        if name == "transformers" or name.startswith("transformers."):
            raise ImportError("No module named 'transformers'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_transformers)


@pytest.fixture(scope="session")
def tiny_shakespeare() -> Path:
    """The tiny Shakespeare the repository ships (nanoGPT's shakespeare_char input)."""
    return ASSETS / "tinyshakespeare" / "input.txt"


@pytest.fixture(scope="session")
def png_magic() -> bytes:
    """The eight bytes every PNG file starts with."""
    return PNG_MAGIC


@pytest.fixture(scope="session")
def tree():
    """tree(path) -> {name relative to path: bytes} of every file under it: what a command
    that refuses a folder must leave exactly as it was."""
    def files(path: Path) -> dict[str, bytes]:
        return {str(p.relative_to(path)): p.read_bytes() for p in sorted(Path(path).rglob("*"))
                if p.is_file()}

    return files


# ----------------------------------------------------------------------------- data, models

WORDS = "the king and queen of a far land who will not go to sea said lord my good".split()


def _make_data(path: Path, n_chars: int = 20_000) -> Path:
    from gptlab.data.prepared import prepare
    from gptlab.data.tokenizer import CharTokenizer

    rng = random.Random(0)
    text = ""
    while len(text) < n_chars:
        text += " ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + ".\n"
    prepare(text, path, CharTokenizer.from_text(text), val_fraction=0.1, source="test")
    return path


@pytest.fixture(scope="session")
def make_data():
    """make_data(path, n_chars=20_000) -> path: a prepared char-level data directory of
    random twelve-word sentences (seeded: the same text every time)."""
    return _make_data


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory) -> Path:
    """make_data's 20,000 characters, prepared once for the session. Read-only: a test
    that writes into a data directory makes its own."""
    return _make_data(tmp_path_factory.mktemp("data") / "d")


def _tiny_model(dropout: float = 0.0):
    from gptlab.model.config import GPTConfig

    return GPTConfig(vocab_size=1, block_size=16, n_layer=2, n_head=2, n_embd=32, bias=False,
                     dropout=dropout)


def _tiny_train(**kw):
    from gptlab.training.config import TrainConfig

    base = dict(batch_size=4, max_iters=12, warmup_iters=2, eval_interval=4, eval_iters=2,
                log_interval=1)
    return TrainConfig.from_dict({**base, **kw})


@pytest.fixture(scope="session")
def tiny_model():
    """tiny_model(dropout=0.0) -> GPTConfig: a bias-free 2-layer GPT-2 of width 32 and
    context 16 (vocab_size 1: train() sets the data's)."""
    return _tiny_model


@pytest.fixture(scope="session")
def tiny_train():
    """tiny_train(**overrides) -> TrainConfig: 12 steps of batch 4, evaluated every 4."""
    return _tiny_train


@pytest.fixture(scope="session")
def losses():
    """losses(run_dir) -> [(kind, step, loss, lr, train_loss, val_loss)] from metrics.jsonl,
    every value as logged: two runs' lists are equal only if they trained alike."""
    def read(run_dir: Path) -> list[tuple]:
        out = []
        for line in (run_dir / "metrics.jsonl").read_text().splitlines():
            r = json.loads(line)
            out.append((r["kind"], r["step"], r.get("loss"), r.get("lr"), r.get("train_loss"),
                        r.get("val_loss")))
        return out

    return read


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory) -> Path:
    """tiny_model trained 8 steps on 5,000 characters of make_data's text: a real run
    directory (its data in the sibling folder data/), for tests that read one. Read-only."""
    from gptlab.training.run import train

    root = tmp_path_factory.mktemp("trained")
    data = _make_data(root / "data", n_chars=5000)
    with _torch_threads(1):
        train(_tiny_model(), _tiny_train(max_iters=8), data, root / "run", progress=False)
    return root / "run"


def _widen(model: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if p.dim() == 2:
                p.copy_(noise / math.sqrt(min(p.shape)))
            elif "norm" in name or "ln_" in name and name.endswith("weight"):
                p.copy_(1 + 0.3 * noise)
            else:
                p.copy_(0.3 * noise)


@pytest.fixture(scope="session")
def widen():
    """widen(model, seed): weights at std ~1/sqrt(fan_in) or more, norm scales around 1,
    biases well off zero, so that a layout mistake cannot hide under tiny values."""
    return _widen


@pytest.fixture(scope="session")
def save_char_model():
    """save_char_model(directory, text, preset=None, seed=0, widen_seed=None, **fields) ->
    (directory, model, tokenizer): a GPT of random weights (torch seed `seed`; widened when
    widen_seed is given), built from `preset` or from `fields` alone, saved as a model
    directory with a character tokenizer of text's characters."""
    from gptlab.data.tokenizer import CharTokenizer
    from gptlab.model.config import GPTConfig
    from gptlab.model.gpt import GPT
    from gptlab.model_dir import TOKENIZER_FILE, save_model

    def save(directory: Path, text: str, preset: str | None = None, seed: int = 0,
             widen_seed: int | None = None, **fields):
        tokenizer = CharTokenizer.from_text(text)
        fields["vocab_size"] = tokenizer.vocab_size
        torch.manual_seed(seed)
        config = GPTConfig.from_preset(preset, **fields) if preset else GPTConfig(**fields)
        model = GPT(config).eval()
        if widen_seed is not None:
            _widen(model, widen_seed)
        save_model(model, directory)
        tokenizer.save(Path(directory) / TOKENIZER_FILE)
        return Path(directory), model, tokenizer

    return save


@pytest.fixture(scope="session")
def context_experiment(tmp_path_factory) -> Path:
    """`gptlab experiment context --quick` run once for the session on make_data's text (the
    folder 'context' of a folder of its own: data/ beside it): eight tiny runs trained at 64,
    results.json, report.md, figures, eval.txt. Read-only: a test that writes copies it."""
    from gptlab.experiments.context import run_context

    root = tmp_path_factory.mktemp("experiment")
    data = _make_data(root / "data")
    with _torch_threads(1):
        run_context(root / "context", data=data, quick=True, log=lambda line: None)
    return root / "context"


def _quick_experiment(tmp_path_factory, name: str) -> Path:
    # start-up time: an experiment's module loads the trainer; collection need not wait
    from gptlab.experiments import catalog

    root = tmp_path_factory.mktemp(f"experiment-{name}")
    data = _make_data(root / "data")
    with _torch_threads(1):
        catalog.experiment(name).run(root / name, data=data, quick=True, log=lambda line: None)
    return root / name


@pytest.fixture(scope="session")
def norm_experiment(tmp_path_factory) -> Path:
    """`gptlab experiment norm --quick` run once for the session on make_data's text (the
    folder 'norm', data/ beside it): 16 tiny runs (pre/post, warm-up or none, depths 1 and
    2, two rates, seed 1337), results.json, report.md, norm.png. Read-only."""
    return _quick_experiment(tmp_path_factory, "norm")


@pytest.fixture(scope="session")
def scale_experiment(tmp_path_factory) -> Path:
    """`gptlab experiment scale --quick`, likewise: 4 tiny runs (d_k 8 and 32, scaled or
    not, seed 1337), results.json, report.md, scale.png. Read-only."""
    return _quick_experiment(tmp_path_factory, "scale")


# ----------------------------------------------------------------------------- Hugging Face

HF_VOCAB = 101
GPT2_CASES = {
    "gpt2-tied-3heads": dict(n_embd=48, n_layer=2, n_head=3, n_positions=64),
    "gpt2-untied-5heads-erf-gelu": dict(n_embd=40, n_layer=2, n_head=5, n_positions=64,
                                        n_inner=72, tie_word_embeddings=False,
                                        layer_norm_epsilon=1e-6, activation_function="gelu"),
}
LLAMA_CASES = {
    "llama-gqa2-untied": dict(hidden_size=48, num_attention_heads=6, num_key_value_heads=3),
    "llama-gqa4-tied-bias": dict(hidden_size=64, num_attention_heads=8, num_key_value_heads=2,
                                 tie_word_embeddings=True, attention_bias=True, mlp_bias=True,
                                 rms_norm_eps=1e-5, rope_theta=500.0),
    "llama-mqa-llama3": dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=1,
                             rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                           "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                           "original_max_position_embeddings": 16}),
    "llama-mha-yarn": dict(hidden_size=48, num_attention_heads=3, num_key_value_heads=3,
                           rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                         "original_max_position_embeddings": 16}),
    "llama-yarn-deepseek-mscale": dict(
        hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
        rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
                      "mscale": 1.0, "mscale_all_dim": 0.5}),
    "llama-linear": dict(hidden_size=32, num_attention_heads=2, num_key_value_heads=1,
                         rope_scaling={"rope_type": "linear", "factor": 2.0}),
}
# Sequential residual and whole-head RoPE, as gptlab's blocks; attention_bias=False comes
# with zero MLP and norm biases (random_hf_model), as `to_hf` writes a bias-free model.
NEOX_CASES = {
    "neox-tied-tanh-gelu-theta500": dict(hidden_size=48, num_attention_heads=3,
                                         tie_word_embeddings=True, hidden_act="gelu_new",
                                         rotary_emb_base=500.0),
    "neox-bias-free-yarn": dict(hidden_size=32, num_attention_heads=4, attention_bias=False,
                                rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                              "original_max_position_embeddings": 16}),
}
# Post-norm OPT (do_layer_norm_before=False, as OPT-350m) with GELU; enable_bias=False comes
# with zero norm biases (random_hf_model), as `to_hf` writes a bias-free model.
OPT_CASES = {
    "opt-post-norm-tied-erf-gelu": dict(hidden_size=48, num_attention_heads=3,
                                        activation_function="gelu"),
    "opt-post-norm-bias-free-untied-tanh": dict(hidden_size=40, num_attention_heads=5,
                                                activation_function="gelu_new",
                                                enable_bias=False, tie_word_embeddings=False),
}
HF_CASES = {**GPT2_CASES, **LLAMA_CASES, **NEOX_CASES, **OPT_CASES}


def _hf_config(name: str):
    import transformers  # the `gptlab[hf]` extra, part of the test extras

    kwargs = dict(HF_CASES[name], vocab_size=HF_VOCAB, bos_token_id=None, eos_token_id=None)
    if name in GPT2_CASES:
        return transformers.GPT2Config(**kwargs)
    if name in OPT_CASES:
        return transformers.OPTConfig(num_hidden_layers=2, ffn_dim=72, max_position_embeddings=64,
                                      do_layer_norm_before=False, pad_token_id=None, **kwargs)
    if name in NEOX_CASES:
        return transformers.GPTNeoXConfig(num_hidden_layers=2, intermediate_size=72,
                                          max_position_embeddings=64, rotary_pct=1.0,
                                          use_parallel_residual=False, **kwargs)
    return transformers.LlamaConfig(num_hidden_layers=2, intermediate_size=72,
                                    max_position_embeddings=64, **kwargs)


def _zero_biases(model: torch.nn.Module) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.zero_()


@pytest.fixture(scope="session")
def zero_biases():
    """zero_biases(model): every bias of the model set to zero."""
    return _zero_biases


@pytest.fixture(scope="session")
def random_hf_model():
    """random_hf_model(name, seed=0): a widened random-init transformers model of one of
    HF_CASES's small shapes (vocabulary 101), in eval mode. No downloads."""
    def make(name: str, seed: int = 0):
        import transformers

        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(_hf_config(name),
                                                              attn_implementation="eager")
        _widen(model, seed)
        if name in NEOX_CASES | OPT_CASES and False in (
                getattr(model.config, "attention_bias", True),
                getattr(model.config, "enable_bias", True)):
            _zero_biases(model)  # what they keep without those biases is zero, as to_hf writes
        return model.eval()

    return make


@pytest.fixture(scope="session", params=list(HF_CASES))
def hf_case(request) -> str:
    """Each of random_hf_model's shapes by name, in turn."""
    return request.param


# ----------------------------------------------------------------------------- the tiny run


@pytest.fixture(scope="session")
def make_tiny_run():
    """make_tiny_run(out_dir, steps=60, seed=0) -> out_dir: tiny-gpt2 trained on a repeated
    sentence with a character tokenizer, in a second (tools/tinyrun.py)."""
    from tools.tinyrun import make_tiny_run

    return make_tiny_run


@pytest.fixture(scope="session")
def tiny_text() -> str:
    """The text the tiny run is trained on."""
    from tools.tinyrun import TEXT

    return TEXT


@pytest.fixture(scope="session")
def tiny_run(make_tiny_run, tmp_path_factory) -> Path:
    """The tiny run, trained 40 steps once for the session: a folder named 'tiny'. For
    tests that only read it; one that writes into a run copies it first (tiny_run_copy)."""
    return make_tiny_run(tmp_path_factory.mktemp("tiny-run") / "tiny", steps=40)


@pytest.fixture(scope="session")
def copy_tiny_run(tiny_run):
    """copy_tiny_run(directory) -> directory: a copy of the tiny run (times kept), for a
    test or a runs folder that may write into it."""
    def copy(directory: Path) -> Path:
        shutil.copytree(tiny_run, directory)
        return Path(directory)

    return copy


# ----------------------------------------------------------------------------- the lab page

# Counts the page's fetches in flight until their JSON is read and the code that awaited
# it has run (the decrement waits for the next task), so a test can wait for a view to be
# drawn instead of sleeping.
COUNT_FETCHES = """
window.__inflight = 0;
const realFetch = window.fetch;
const done = () => setTimeout(() => window.__inflight--);
window.fetch = (...args) => {
  window.__inflight++;
  return realFetch(...args).then((response) => {
    const json = response.json.bind(response);
    response.json = () => json().finally(done);
    return response;
  }, (error) => { done(); throw error; });
};
"""


@pytest.fixture(scope="module")
def chromium():
    """A headless Chromium for one test module (tools.screenshots' executable and flags).
    Per module, not per session: while Playwright's sync API is open it keeps an event loop
    marked running in the main thread, where asyncio.run (a test's own, or lm-eval's API
    backend's) would then fail in every later module."""
    from playwright.sync_api import sync_playwright
    from tools.screenshots import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class LabPage:
    """A page of the lab in its own browser context; its uncaught errors collected, its
    fetches counted (COUNT_FETCHES)."""

    def __init__(self, browser, url: str, timeout_ms: int = 20_000, **context) -> None:
        self.context = browser.new_context(**context)
        self.page = self.context.new_page()
        self.page.add_init_script(COUNT_FETCHES)
        self.page.set_default_timeout(timeout_ms)
        self.errors: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(url)


@pytest.fixture(scope="module")
def open_lab(chromium):
    """`with open_lab(url, ready_selector, **context) as lab:` a LabPage, once
    ready_selector is drawn; on leaving, the page must have raised no error, and its
    context is closed."""
    @contextlib.contextmanager
    def open_page(url: str, ready: str, **context):
        lab = LabPage(chromium, url, **context)
        try:
            lab.page.wait_for_selector(ready)
            yield lab
            assert not lab.errors, lab.errors
        finally:
            lab.context.close()

    return open_page


@pytest.fixture(scope="session")
def settle():
    """settle(page): wait until every fetch the page made is answered and the code that
    awaited it has run (the view is drawn)."""
    def wait(page) -> None:
        page.wait_for_function("window.__inflight === 0", timeout=60_000)

    return wait


@pytest.fixture(scope="session")
def lab_url(copy_tiny_run, tmp_path_factory):
    """The lab served on a free 127.0.0.1 port over a runs folder holding a copy of the
    tiny run ('tiny'), for the session's browser tests that leave the folder as it is. Its
    address picks the tiny run (?run=tiny) over the shipped model, which is listed first."""
    from gptlab.lab.server import BackgroundServer

    runs = tmp_path_factory.mktemp("lab-runs")
    copy_tiny_run(runs / "tiny")
    with BackgroundServer(runs) as url:
        yield url + "?run=tiny"


# Another process holding a run's lock, as a running trainer holds it (gptlab.training.rundir).
_HOLD_LOCK = """
import sys, time
from pathlib import Path
from gptlab.training.rundir import locked
with locked(Path(sys.argv[1])):
    print("locked", flush=True)
    time.sleep(120)
"""


@pytest.fixture(scope="session")
def lock_held():
    """lock_held(run_dir): a context manager under which another process holds run_dir's
    lock; it yields that process (its pid is the one a refusal or `gptlab runs` names)."""
    @contextlib.contextmanager
    def held(run_dir: Path):
        proc = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(run_dir)],
                                stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "locked"
            yield proc
        finally:
            proc.kill()
            proc.wait()

    return held


@pytest.fixture
def probing(monkeypatch):
    """Probes run again (the suite switches them off), for the tests of probing itself."""
    monkeypatch.delenv("GPTLAB_PROBE")
