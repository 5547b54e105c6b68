"""Every dotted `gptlab.` name the project writes down resolves to an object that exists.

Docstrings, comments, help texts (strings in the cli modules), bench/ and tools/, the
README, docs/, BENCHMARKS.md and the notebooks' cells name modules and functions as
`gptlab.x.y`; a module that moves leaves those names pointing nowhere. Each name is
resolved by importing its longest module prefix and taking the rest as attributes.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

from gptlab.convert.gguf_export import GGUF_CONFIG_KEY
from gptlab.files.authorship import GGUF_KEY

ROOT = Path(__file__).resolve().parents[1]

# A dotted name starts at a word boundary that is not part of a path or a longer name:
# `.gptlab.json` (the run mark) and `runs/gptlab.x` are files, not modules. The name ends
# at the first character that cannot continue it, so `gptlab.load(...)` is `gptlab.load`.
DOTTED = re.compile(r"(?<![\w./-])gptlab(?:\.[A-Za-z_]\w*)+")

# Names that are not Python objects by design: the GGUF metadata keys gptlab writes.
NOT_OBJECTS = {GGUF_KEY, GGUF_CONFIG_KEY}


def _texts() -> Iterator[tuple[str, str]]:
    """(where, line) for every line that may name a gptlab object."""
    files = sorted((ROOT / "src/gptlab").rglob("*.py"))
    files += sorted((ROOT / "bench").rglob("*.py")) + sorted((ROOT / "tools").rglob("*.py"))
    static = ROOT / "src/gptlab/lab/static"  # the lab's page names the code behind each view
    files += sorted(static.glob("*.js")) + sorted(static.glob("*.html"))
    files += [ROOT / "README.md", ROOT / "BENCHMARKS.md"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            yield f"{path.relative_to(ROOT)}:{number}", line
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for index, cell in enumerate(cells):
            source = "".join(cell["source"]).splitlines()
            for number, line in enumerate(source, 1):
                yield f"{path.relative_to(ROOT)}:cell {index}:{number}", line


def dotted_names() -> dict[str, list[str]]:
    """Every dotted gptlab name, with where it is written."""
    found: dict[str, list[str]] = {}
    for where, line in _texts():
        for match in DOTTED.finditer(line):
            found.setdefault(match.group(0), []).append(where)
    return found


def resolves(name: str) -> bool:
    """Whether `name` is a module or an attribute chain under one."""
    parts = name.split(".")
    obj = importlib.import_module(parts[0])
    for depth in range(1, len(parts)):
        if hasattr(obj, parts[depth]):
            obj = getattr(obj, parts[depth])
            continue
        if not hasattr(obj, "__path__"):  # only a package has submodules to import
            return False
        module = ".".join(parts[: depth + 1])
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name != module:  # a missing dependency, not a stale name
                raise
            return False
    return True


def test_every_dotted_gptlab_name_resolves():
    stale = [f"{where}: {name}" for name, places in sorted(dotted_names().items())
             if name not in NOT_OBJECTS and not resolves(name) for where in places]
    assert not stale, "names that resolve to nothing:\n" + "\n".join(stale)


def test_the_scan_reads_sources_docs_and_notebooks():
    places = [where for wheres in dotted_names().values() for where in wheres]
    for kind in ("src/gptlab/", "bench/", "README.md:", "BENCHMARKS.md:", "docs/", "notebooks/"):
        assert any(where.startswith(kind) for where in places), kind


def test_paths_and_calls_are_read_as_what_they_are():
    line = "a run's mark `.gptlab.json`, runs/gptlab.txt and gptlab.load(path) on gptlab.lab."
    assert [m.group(0) for m in DOTTED.finditer(line)] == ["gptlab.load", "gptlab.lab"]


def test_names_that_moved_do_not_resolve():
    assert resolves("gptlab.model.attention.attention_steps")
    assert resolves("gptlab.model.params.Accounting.to_dict")
    for gone in ("gptlab.attention.attention_steps", "gptlab.lab.models",
                 "gptlab.model.params.Accounting.missing", "gptlab.params.Accounting"):
        assert not resolves(gone), gone
