"""The runs folder: which runs the lab may open, and a cache of loaded models.

A run is a folder holding config.json, model.safetensors and tokenizer.json. The page names
a run by its path relative to the runs folder; anything that resolves outside it (`..`, an
absolute path, a symlink pointing out) is refused before a file is opened.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gptlab.checkpoint import CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE, load_model
from gptlab.errors import UsageError
from gptlab.model import GPT

RUN_FILES = (CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE)
MAX_DEPTH = 3  # runs nested up to runs/<a>/<b>/<c>
MAX_CACHED = 4


@dataclass
class LoadedRun:
    name: str
    model: GPT
    tokenizer: object  # gptlab.tokenizers.Tokenizer


def is_run(path: Path) -> bool:
    return all((path / f).is_file() for f in RUN_FILES)


class Runs:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self._cache: dict[tuple, LoadedRun] = {}
        self._lock = threading.Lock()

    def list(self) -> list[str]:
        """Run names (posix paths relative to the root), sorted; symlinks out are skipped."""
        if not self.root.is_dir():
            return []
        found = []
        frontier = [self.root]
        for _ in range(MAX_DEPTH):
            next_frontier = []
            for folder in frontier:
                for child in sorted(folder.iterdir()):
                    if not child.is_dir() or not self._inside(child.resolve()):
                        continue
                    if is_run(child):
                        found.append(child.relative_to(self.root).as_posix())
                    else:
                        next_frontier.append(child)
            frontier = next_frontier
        return sorted(found)

    def _inside(self, resolved: Path) -> bool:
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
        path = (self.root / pure).resolve()
        if not self._inside(path):
            raise UsageError(f"run {name!r} points outside the runs folder")
        if not path.is_dir() or not is_run(path):
            raise UsageError(f"no run named {name!r} in the runs folder "
                             f"(a run holds {', '.join(RUN_FILES)})")
        for f in RUN_FILES:  # a file symlinked out of the folder is refused too
            if not self._inside((path / f).resolve()):
                raise UsageError(f"run {name!r}: {f} points outside the runs folder")
        return path

    def load(self, name: object) -> LoadedRun:
        """Model and tokenizer, loaded once and kept while their files are unchanged."""
        from gptlab.tokenizers import load_tokenizer

        path = self.resolve(name)
        key = (str(path),) + tuple((path / f).stat().st_mtime_ns for f in RUN_FILES)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                return hit
            run = LoadedRun(str(name), load_model(path), load_tokenizer(path / TOKENIZER_FILE))
            stale = [k for k in self._cache if k[0] == key[0]]
            for k in stale:
                del self._cache[k]
            if len(self._cache) >= MAX_CACHED:
                del self._cache[next(iter(self._cache))]
            self._cache[key] = run
            return run
