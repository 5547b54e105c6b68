import hashlib
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gptlab.data import download
from gptlab.data.download import cache_path, fetch
from gptlab.errors import GptlabError, UsageError

BODY = bytes(range(256)) * 400  # 102,400 bytes
SHA = hashlib.sha256(BODY).hexdigest()


class _Server:
    """A local HTTP server serving BODY, honouring Range, and able to misbehave."""

    def __init__(self):
        self.requests: list[dict] = []
        self.cut_after: int | None = None  # close the connection after this many body bytes
        self.honour_range = True
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests.append({"path": self.path, "range": self.headers.get("Range")})
                if self.path != "/file.txt":
                    self.send_error(404)
                    return
                start = 0
                match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
                if match and server.honour_range:
                    start = int(match.group(1))
                    if start >= len(BODY):
                        self.send_error(416)
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(BODY) - 1}/{len(BODY)}")
                else:
                    self.send_response(200)
                body = BODY[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if server.cut_after is not None:
                    body = body[: server.cut_after]
                    server.cut_after = None  # only the first response is cut
                    self.close_connection = True
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/file.txt"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def close(self):
        if not self.thread.is_alive():
            return
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def server():
    s = _Server()
    yield s
    s.close()


def _files(cache):
    return sorted(p.name for p in (cache / "downloads").iterdir())


def test_fetch_downloads_checks_and_caches(server, tmp_path):
    path = fetch(server.url, sha256=SHA, cache_dir=tmp_path)
    assert path.read_bytes() == BODY
    assert path == cache_path(server.url, tmp_path) and path.name.endswith("-file.txt")
    assert _files(tmp_path) == [path.name]  # no .part left behind
    assert fetch(server.url, sha256=SHA, cache_dir=tmp_path) == path
    assert len(server.requests) == 1  # the second call was served from the cache


def test_fetch_resumes_a_partial_file_with_range(server, tmp_path):
    part = cache_path(server.url, tmp_path).with_suffix(".txt.part")
    part.parent.mkdir(parents=True)
    part.write_bytes(BODY[:40_000])
    path = fetch(server.url, sha256=SHA, cache_dir=tmp_path)
    assert path.read_bytes() == BODY
    assert server.requests == [{"path": "/file.txt", "range": "bytes=40000-"}]
    assert not part.exists()


def test_interrupted_download_keeps_part_and_resumes(server, tmp_path):
    server.cut_after = 30_000
    with pytest.raises(GptlabError, match="run again to resume"):
        fetch(server.url, sha256=SHA, cache_dir=tmp_path)
    part = cache_path(server.url, tmp_path).with_suffix(".txt.part")
    assert part.read_bytes() == BODY[:30_000]
    assert not cache_path(server.url, tmp_path).exists()
    path = fetch(server.url, sha256=SHA, cache_dir=tmp_path)
    assert path.read_bytes() == BODY
    assert server.requests[-1]["range"] == "bytes=30000-"


def test_server_ignoring_range_restarts_cleanly(server, tmp_path):
    server.honour_range = False
    part = cache_path(server.url, tmp_path).with_suffix(".txt.part")
    part.parent.mkdir(parents=True)
    part.write_bytes(b"garbage that is not a prefix")
    assert fetch(server.url, sha256=SHA, cache_dir=tmp_path).read_bytes() == BODY


def test_unsatisfiable_range_restarts(server, tmp_path):
    part = cache_path(server.url, tmp_path).with_suffix(".txt.part")
    part.parent.mkdir(parents=True)
    part.write_bytes(BODY + b"extra")  # longer than the file: the server answers 416
    assert fetch(server.url, sha256=SHA, cache_dir=tmp_path).read_bytes() == BODY
    assert [r["range"] for r in server.requests] == [f"bytes={len(BODY) + 5}-", None]


def test_checksum_mismatch_deletes_the_download(server, tmp_path):
    with pytest.raises(GptlabError, match=f"checksum mismatch .* expected sha256 {'0' * 64}, "
                                          f"got {SHA}; the download was deleted"):
        fetch(server.url, sha256="0" * 64, cache_dir=tmp_path)
    assert _files(tmp_path) == []


def test_cached_file_with_wrong_checksum_is_fetched_again(server, tmp_path):
    final = cache_path(server.url, tmp_path)
    final.parent.mkdir(parents=True)
    final.write_bytes(b"corrupted")
    assert fetch(server.url, sha256=SHA, cache_dir=tmp_path).read_bytes() == BODY
    assert len(server.requests) == 1


def test_http_error_is_one_line(server, tmp_path):
    with pytest.raises(GptlabError, match=r"could not download .*/missing.txt: HTTP 404") as exc:
        fetch(server.url.replace("file.txt", "missing.txt"), cache_dir=tmp_path)
    assert "\n" not in str(exc.value)


def test_unreachable_host(tmp_path, server):
    url = server.url
    server.close()  # nothing listens on that port any more
    with pytest.raises(GptlabError, match="could not download"):
        fetch(url, cache_dir=tmp_path / "c")


def test_cache_dir_from_environment(server, tmp_path, monkeypatch):
    monkeypatch.setenv("GPTLAB_CACHE", str(tmp_path / "envcache"))
    path = fetch(server.url, cache_dir=None)
    assert path.parent == tmp_path / "envcache" / "downloads"


def test_only_http_urls(tmp_path):
    with pytest.raises(UsageError, match="http"):
        fetch("file:///etc/passwd", cache_dir=tmp_path)


def test_tinyshakespeare_checksum_is_the_real_file(tiny_shakespeare):
    digest = hashlib.sha256(tiny_shakespeare.read_bytes()).hexdigest()
    assert digest == download.TINYSHAKESPEARE_SHA256
    assert download.TINYSHAKESPEARE_URL == (
        "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
    )
