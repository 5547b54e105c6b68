"""Downloads into a local cache: checksummed, resumable, and never half-visible.

A download goes to `<name>.part` beside its final path; an interrupted one resumes from
there with an HTTP Range request. Only a complete file whose checksum matches is renamed
into place, so a file in the cache under its final name is always whole.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from tqdm import tqdm

from gptlab.errors import GptlabError, Setting, SettingError

TINYSHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
)
TINYSHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"

CHUNK = 1 << 16
TIMEOUT_S = 30


def default_cache_dir() -> Path:
    """$GPTLAB_CACHE, else ~/.cache/gptlab."""
    return Path(os.environ.get("GPTLAB_CACHE") or Path.home() / ".cache" / "gptlab")


def cache_path(url: str, directory: Path) -> Path:
    # The URL's hash keeps two files both called input.txt apart; the name keeps it readable.
    name = Path(urllib.parse.urlparse(url).path).name or "download"
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return directory / "downloads" / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}-{name}"


def fetch(url: str, sha256: str | None = None, cache_dir: str | Path | None = None) -> Path:
    """Return the cached file for `url`, downloading (or resuming) it first if needed."""
    scheme = urllib.parse.urlparse(url).scheme
    if scheme not in ("http", "https"):
        raise SettingError(Setting("url"), f" must be an http(s) URL, got {url!r}")
    directory = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    final = cache_path(url, directory)
    if final.is_file():
        if sha256 is None or _sha256(final) == sha256.lower():
            return final
        final.unlink()  # a cached file that no longer matches is fetched again
    final.parent.mkdir(parents=True, exist_ok=True)
    part = final.with_name(final.name + ".part")
    _download(url, part)
    if sha256 is not None:
        actual = _sha256(part)
        if actual != sha256.lower():
            part.unlink()
            raise GptlabError(
                f"checksum mismatch for {url}: expected sha256 {sha256}, got {actual}; "
                "the download was deleted"
            )
    with open(part, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(part, final)
    return final


def _download(url: str, part: Path) -> None:
    """Fill `part` with the whole resource, continuing from whatever it already holds."""
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"User-Agent": "gptlab"})
    if have:
        request.add_header("Range", f"bytes={have}-")
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the part file is not a prefix we can extend: restart
            part.unlink()
            return _download(url, part)
        raise GptlabError(f"could not download {url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise GptlabError(f"could not download {url}: {reason}") from None
    with response:
        resumed = have and response.status == 206 and _range_start(response) == have
        if not resumed:
            have = 0  # the server sent the whole file (it ignored our Range, or none was asked)
        length = response.headers.get("Content-Length")
        total = have + int(length) if length and length.isdigit() else None
        name = part.name.removesuffix(".part").split("-", 1)[-1]
        try:
            with open(part, "ab" if resumed else "wb") as f, tqdm(
                total=total, initial=have, unit="B", unit_scale=True, desc=name, disable=None
            ) as bar:
                while chunk := response.read(CHUNK):
                    f.write(chunk)
                    bar.update(len(chunk))
        except (http.client.HTTPException, OSError) as exc:
            raise GptlabError(
                f"download of {url} interrupted ({exc}); run again to resume"
            ) from None
    got = part.stat().st_size
    if total is not None and got != total:
        raise GptlabError(
            f"download of {url} stopped at {got} of {total} bytes; run again to resume"
        )


def _range_start(response) -> int | None:
    match = re.match(r"bytes (\d+)-", response.headers.get("Content-Range", ""))
    return int(match.group(1)) if match else None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
