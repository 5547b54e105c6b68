"""The runs folder: which runs the lab may open, a cache of loaded models, and the lock that
lets one request at a time use them.

A run is a model directory with its tokenizer (gptlab.model_dir.MODEL_FILES: config.json,
model.safetensors, tokenizer.json). The page names a run by its path relative to the runs
folder; anything that resolves outside it (`..`, an absolute path, a symlink pointing out)
is refused before a file is opened. The models gptlab ships (gptlab.pretrained) are runs
too, by name, listed first (the page opens on the first). As everywhere in gptlab
(gptlab.loading.resolve), a shipped model's name always means the shipped model: a run
folder of that name is listed and opened as ./NAME.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gptlab import pretrained
from gptlab.data.tokenizer import encode_checked
from gptlab.errors import GptlabError, UsageError
from gptlab.model.gpt import GPT
from gptlab.model_dir import MODEL_FILES, load_model, load_tokenizer_of
from gptlab.training.runs import model_dirs

MAX_DEPTH = 3  # runs nested up to runs/<a>/<b>/<c>
MAX_CACHED = 4


@dataclass
class LoadedRun:
    name: str
    model: GPT
    tokenizer: object  # gptlab.data.tokenizer.Tokenizer


def is_run(path: Path) -> bool:
    return all((path / f).is_file() for f in MODEL_FILES)


class Runs:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self._cache: dict[tuple, LoadedRun] = {}
        self._lock = threading.Lock()  # guards the cache
        # Held while a request runs a model: every request shares the loaded models, and
        # gptlab.interp.heads's instruments (hooks, capture switches, eval mode) change them.
        self.model_lock = threading.Lock()

    def list(self) -> list[str]:
        """The shipped models' names first, then the runs folder's (posix paths relative to
        the root, sorted; symlinks out are skipped: gptlab.training.runs's listing, as
        `gptlab runs` and the notebooks list), a run named as a shipped model as ./NAME."""
        found = [p.relative_to(self.root).as_posix() for p in model_dirs(self.root, MAX_DEPTH)]
        return [*pretrained.NAMES,
                *(f"./{n}" if pretrained.is_shipped(n) else n for n in found)]

    def inside(self, resolved: Path) -> bool:
        """Whether a resolved path is the runs folder or lies inside it."""
        return resolved == self.root or self.root in resolved.parents

    def resolve(self, name: object) -> Path:
        """The run folder for `name`, or a UsageError if it is not a run inside the root."""
        if not isinstance(name, str) or not name.strip():
            raise UsageError("run must be the name of a run in the runs folder")
        if len(name) > 500 or "\x00" in name or "\\" in name:
            raise UsageError(f"run {name[:60]!r} is not a valid run name")
        pure = PurePosixPath(name)
        if pure.is_absolute() or any(part in ("..", ".") for part in pure.parts):
            raise UsageError(f"run {name!r} must be a path inside the runs folder, "
                             "without '..' or a leading '/'")
        try:
            return self._resolve(name, pure)
        except (OSError, RuntimeError) as exc:  # a name too long, a symlink loop
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UsageError(f"run {name[:60]!r} cannot be opened: {reason}") from None

    def _resolve(self, name: str, pure: PurePosixPath) -> Path:
        if pretrained.is_shipped(name):  # "./NAME" is not: it names the runs folder's
            return pretrained.folder(name)  # checked against its manifest when loaded
        path = (self.root / pure).resolve()
        if not self.inside(path):
            raise UsageError(f"run {name!r} points outside the runs folder")
        if not path.is_dir() or not is_run(path):
            raise UsageError(f"no run named {name!r} in the runs folder "
                             f"(a run holds {', '.join(MODEL_FILES)})")
        for f in MODEL_FILES:  # a file symlinked out of the folder is refused too
            if not self.inside((path / f).resolve()):
                raise UsageError(f"run {name!r}: {f} points outside the runs folder")
        return path

    def load(self, name: object) -> LoadedRun:
        """Model and tokenizer, loaded once and kept while their files are unchanged."""
        path = self.resolve(name)
        try:
            key = (str(path),) + tuple((path / f).stat().st_mtime_ns for f in MODEL_FILES)
        except OSError as exc:  # removed since resolve()
            raise UsageError(f"run {name!r} cannot be opened: {exc.strerror or exc}") from None
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                return hit
            try:
                if path.parent == pretrained.HERE:
                    pretrained.verified(path.name)
                run = LoadedRun(str(name), load_model(path), load_tokenizer_of(path))
            except GptlabError as exc:  # a damaged shipped model: one line, as bad input is
                raise UsageError(str(exc)) from None
            except OSError as exc:  # unreadable files (load_model reports broken ones)
                raise UsageError(f"run {name!r} cannot be read: {exc.strerror or exc}") from None
            stale = [k for k in self._cache if k[0] == key[0]]
            for k in stale:
                del self._cache[k]
            if len(self._cache) >= MAX_CACHED:
                del self._cache[next(iter(self._cache))]
            self._cache[key] = run
            return run

    def encoding(self, text: str) -> list[str]:
        """The runs whose tokenizer encodes text (no character outside its vocabulary),
        reading only their tokenizers: the page's pickers default to one of them, so a
        view's default text works."""
        found = []
        for name in self.list():
            try:
                encode_checked(load_tokenizer_of(self.resolve(name)), text, "text", len(text) + 1)
            except (UsageError, OSError):  # a character it lacks, or a tokenizer it cannot read
                continue
            found.append(name)
        return found

    def fitted(self, name: str, text: str) -> str:
        """text without the characters run `name`'s tokenizer cannot encode, its spaces
        evened: what a view offers instead of a bare vocabulary error when the address's
        text meets a run with a smaller vocabulary. When nothing of text is left, the
        first few tokens of the vocabulary (still a text the run encodes)."""
        tokenizer = load_tokenizer_of(self.resolve(name))

        def encodes(part: str) -> bool:
            try:
                return bool(tokenizer.encode(part))
            except UsageError:
                return False

        kept = re.sub(" {2,}", " ", "".join(c for c in text if encodes(c))).strip(" ")
        return kept or tokenizer.decode(list(range(min(8, tokenizer.vocab_size))))
