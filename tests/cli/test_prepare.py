"""`gptlab prepare`: a file, a URL, the embedded corpus and a cached download, char and BPE
tokenizers, and every bad input in one line, before anything is written or fetched."""

import json
import shutil
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gptlab.data import download
from gptlab.data.prepared import load_data
from gptlab.data.tokenizer import load_tokenizer


def test_prepare_input_file(tmp_path, gptlab, tiny_shakespeare):
    code, out, err = gptlab("prepare", "--input", tiny_shakespeare, "--out", tmp_path / "d")
    assert code == 0, err
    assert "1,115,394 characters -> 1,003,854 train + 111,540 val tokens" in out
    assert "vocab 65, uint16" in out
    data = load_data(tmp_path / "d")
    assert (len(data.train), len(data.val), data.vocab_size) == (1003854, 111540, 65)
    assert data.meta["source"] == str(tiny_shakespeare)


def test_prepare_bpe_then_reuse_its_tokenizer(tmp_path, gptlab, tiny_shakespeare):
    text = tiny_shakespeare.read_text(encoding="utf-8")[:100_000]
    (tmp_path / "in.txt").write_text(text, encoding="utf-8")
    source = str(tmp_path / "in.txt")
    code, _, err = gptlab("prepare", "--input", source, "--tokenizer", "bpe", "--vocab-size", "300",
                        "--val-fraction", "0.2", "--out", str(tmp_path / "a"))
    assert code == 0, err
    meta = json.loads((tmp_path / "a/meta.json").read_text())
    assert (meta["tokenizer"], meta["vocab_size"], meta["val_fraction"]) == ("bpe", 300, 0.2)
    tok_path = tmp_path / "a/tokenizer.json"
    code, _, err = gptlab("prepare", "--input", source, "--tokenizer", str(tok_path),
                        "--val-fraction", "0.2", "--out", str(tmp_path / "b"))
    assert code == 0, err
    assert json.loads((tmp_path / "b/meta.json").read_text())["tokenizer"] == "file"
    for name in ("train.bin", "val.bin"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    tok = load_tokenizer(tmp_path / "b/tokenizer.json")
    assert tok.decode(load_data(tmp_path / "b").val.tolist()) == text[int(len(text) * 0.8):]


def test_bpe_that_learns_fewer_tokens_than_asked_says_so(tmp_path, gptlab, tiny_shakespeare):
    """On 3 KB, --vocab-size 100000 gave 540 tokens, said only as `vocab 540`."""
    (tmp_path / "in.txt").write_text(tiny_shakespeare.read_text(encoding="utf-8")[:3000],
                                     encoding="utf-8")
    code, out, err = gptlab("prepare", "--input", tmp_path / "in.txt", "--tokenizer", "bpe",
                            "--vocab-size", "100000", "--out", tmp_path / "a")
    vocab = json.loads((tmp_path / "a/meta.json").read_text())["vocab_size"]
    assert code == 0 and vocab < 1000 and f"vocab {vocab:,}," in out
    assert err == (f"gptlab prepare: note: BPE learned a vocabulary of {vocab:,} tokens, not "
                   f"the 100,000 --vocab-size asked for: merges stop where no pair of tokens "
                   f"appears twice in the text (more text gives more)\n")


def test_prepare_embedded_shakespeare(tmp_path, gptlab):
    code, out, err = gptlab("prepare", "shakespeare", "--out", str(tmp_path / "d"))
    assert code == 0, err
    data = load_data(tmp_path / "d")
    assert data.meta["source"] == "shakespeare" and data.vocab_size == 76
    assert len(data.train) + len(data.val) == 4_782_201
    tok = load_tokenizer(data.tokenizer_path)
    assert tok.decode(data.train[:9].tolist()) == "THESEUS:\n"


def test_prepare_tinyshakespeare_from_cache(tmp_path, monkeypatch, gptlab, tiny_shakespeare):
    # Seed the cache with the real file, as a finished earlier download would have left it.
    monkeypatch.setenv("GPTLAB_CACHE", str(tmp_path / "cache"))
    cached = download.cache_path(download.TINYSHAKESPEARE_URL, tmp_path / "cache")
    cached.parent.mkdir(parents=True)
    shutil.copy(tiny_shakespeare, cached)
    code, out, err = gptlab("prepare", "tinyshakespeare", "--out", str(tmp_path / "d"))
    assert code == 0, err
    assert out.startswith("tinyshakespeare: 1,115,394 characters -> 1,003,854 train + 111,540 val")


def test_prepare_url_from_local_server(tmp_path, monkeypatch, gptlab):
    (tmp_path / "www").mkdir()
    (tmp_path / "www/corpus.txt").write_text("hello there, general kenobi\n" * 20)
    handler = partial(SimpleHTTPRequestHandler, directory=str(tmp_path / "www"))
    handler.log_message = lambda *a: None
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        monkeypatch.setenv("GPTLAB_CACHE", str(tmp_path / "cache"))
        url = f"http://127.0.0.1:{httpd.server_address[1]}/corpus.txt"
        code, out, err = gptlab("prepare", "--url", url, "--out", str(tmp_path / "d"))
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
    assert code == 0, err
    assert load_data(tmp_path / "d").meta["source"] == url


def _latin1(tmp_path):
    (tmp_path / "latin1.txt").write_bytes("abc\ncafé".encode("latin-1"))
    return str(tmp_path / "latin1.txt")


def _text(tmp_path, content="some text for the corpus\n" * 4):
    (tmp_path / "in.txt").write_text(content)
    return str(tmp_path / "in.txt")


@pytest.mark.parametrize("make_args, message", [
    (lambda t: [], "give exactly one source"),
    (lambda t: ["shakespeare", "--input", _text(t)], "give exactly one source"),
    (lambda t: ["hamlet"], "unknown corpus 'hamlet'; known: shakespeare, tinyshakespeare"),
    (lambda t: ["--input", str(t / "nope.txt")], "input not found: "),
    (lambda t: ["--input", _latin1(t)], "latin1.txt is not UTF-8 text: byte 0xe9 at offset 7"),
    (lambda t: ["--input", _text(t, " \n\n ")], "the corpus is empty"),
    (lambda t: ["--input", _text(t), "--val-fraction", "1.5"], "--val-fraction must be between"),
    (lambda t: ["--input", _text(t), "--val-fraction", "0"], "--val-fraction must be between"),
    (lambda t: ["--input", _text(t), "--tokenizer", "bpe", "--vocab-size", "100"], "too small"),
    (lambda t: ["--input", _text(t), "--tokenizer", "bpe", "--vocab-size", str(2**31 - 1)],
     "too large"),  # the tokenizers library aborted the process
    (lambda t: ["--input", _text(t), "--tokenizer", "bpe", "--vocab-size", str(2**70)],
     "too large"),  # an OverflowError
    (lambda t: ["--input", _text(t), "--vocab-size", "500"], "only to --tokenizer bpe"),
    (lambda t: ["--input", _text(t), "--tokenizer", str(t / "none.json")], "tokenizer file not"),
    (lambda t: ["--url", "ftp://example.com/x.txt"], "must be an http(s) URL"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, make_args, message, gptlab):
    code, out, err = gptlab("prepare", *make_args(tmp_path), "--out", str(tmp_path / "d"))
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("gptlab prepare: error: ")
    assert message in err
    assert not (tmp_path / "d").exists()


def test_an_out_that_cannot_be_created_is_one_line(tmp_path, gptlab):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    for out, message in ((a_file, "exists and is not a directory"),
                         (a_file / "sub", f"cannot create directory {a_file / 'sub'}: "
                                          f"{a_file} is a file"),
                         (a_file / "a" / "b", f"{a_file} is a file"),
                         ("/proc/gptlab-no/such", "cannot create directory /proc/gptlab-no")):
        code, out_text, err = gptlab("prepare", "--input", _text(tmp_path), "--out", str(out))
        assert code == 2 and out_text == "" and err.count("\n") == 1, err
        assert err.startswith("gptlab prepare: error: ") and message in err
    assert a_file.read_text() == "x"


def test_an_out_that_holds_a_model_is_refused(tmp_path, gptlab):
    """prepare would replace the model's tokenizer.json with its own."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{}")
    (run / "tokenizer.json").write_text("the model's")
    code, _, err = gptlab("prepare", "--input", _text(tmp_path), "--out", str(run))
    assert code == 2 and "holds files gptlab did not write (config.json, tokenizer.json): " \
        "give the data a new or empty folder" in err
    assert (run / "tokenizer.json").read_text() == "the model's"


def test_a_bad_out_is_said_before_downloading(tmp_path, monkeypatch, gptlab):
    def no_network(*args, **kwargs):
        raise AssertionError("fetched before --out was checked")

    monkeypatch.setattr(download, "fetch", no_network)
    (tmp_path / "f").write_text("x")
    code, _, err = gptlab("prepare", "tinyshakespeare", "--out", str(tmp_path / "f" / "d"))
    assert code == 2 and "is a file" in err


def test_network_failure_exits_1_one_line(tmp_path, monkeypatch, gptlab):
    """A download that cannot happen is a failure (exit 1), not bad input (README)."""
    import urllib.error
    import urllib.request

    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -2] Name or service not known")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    monkeypatch.setenv("GPTLAB_CACHE", str(tmp_path / "cache"))
    code, out, err = gptlab("prepare", "--url", "https://example.com/x.txt", "--out",
                          str(tmp_path / "d"))
    assert code == 1 and out == "" and err.count("\n") == 1
    assert "could not download https://example.com/x.txt" in err
    assert not (tmp_path / "d").exists()


def test_console_entry_point_has_no_traceback(tmp_path, gptlab_process):
    result = gptlab_process("prepare", "--input", tmp_path / "missing.txt", "--out",
                            tmp_path / "d")
    assert result.returncode == 2
    assert result.stderr == f"gptlab prepare: error: input not found: {tmp_path / 'missing.txt'}\n"


def test_characters_a_char_tokenizer_lacks_are_refused_by_name_or_left_out(tmp_path, gptlab):
    """A char tokenizer has no unknown token: a text with new characters (to fine-tune a
    model on) is refused, naming them and the way out; --drop-unknown leaves them out and
    says how many."""
    base = tmp_path / "base"
    assert gptlab("prepare", "--input", _text(tmp_path), "--out", base)[0] == 0
    play = tmp_path / "play.txt"
    play.write_text("some text for the corpus, café!\n" * 40)
    code, out, err = gptlab("prepare", "--input", play, "--tokenizer", base / "tokenizer.json",
                            "--out", tmp_path / "d")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert ("has 4 character(s) the char tokenizer (14 symbols) has no token for: ',' x40, "
            "'a' x40, 'é' x40, '!' x40") in err and "--drop-unknown" in err
    assert not (tmp_path / "d").exists()
    code, out, err = gptlab("prepare", "--input", play, "--tokenizer", base / "tokenizer.json",
                            "--out", tmp_path / "d", "--drop-unknown")
    assert code == 0, err
    assert "left out 160 characters the tokenizer has no token for: ',' x40" in out
    data = load_data(tmp_path / "d")
    assert data.meta["train_tokens"] + data.meta["val_tokens"] == 40 * 28
    code, _, err = gptlab("prepare", "--input", play, "--tokenizer", "bpe", "--drop-unknown",
                          "--out", tmp_path / "e")
    assert code == 2 and "--drop-unknown is for a character tokenizer.json" in err
