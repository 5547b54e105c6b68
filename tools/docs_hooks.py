"""MkDocs hooks (mkdocs.yml): what the site shows from outside docs/, and the manual's
names linked to the API reference.

docs/benchmarks-full.md includes BENCHMARKS.md (pymdownx.snippets), whose figures are
bench/results/*.png, beside the benchmarks that write them. They join the site at the same
relative paths, so BENCHMARKS.md's image links work both on GitHub and in the site.

The experiments' default-size results and figures are package data
(src/gptlab/experiments/shipped/, gptlab.experiments.shipped_results: the lab shows them on a
fresh install), kept in one place; the site serves them where docs/experiments.md links
them, NAME.json at experiments/results/NAME.json and each figure at experiments/FIGURE.png.
A file docs/ holds at the same place is an error, not silently one of two copies.

A dotted name in backticks in the prose (`gptlab.training.footprint`) becomes a link to
its entry in the API reference when it has one (mkdocs-autorefs' optional reference: a name
with no entry, such as the lazily imported `gptlab.load`, stays plain code, no warning).
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[1]
FIGURES = "bench/results"
SHIPPED = "src/gptlab/experiments/shipped"

NAME = re.compile(r"`(gptlab(?:\.[A-Za-z_]\w*)+)`")
FENCE = re.compile(r"^\s*```")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the benchmarks' figures to the site's files."""
    for path in sorted((ROOT / FIGURES).glob("*.png")):
        files.append(File(path.relative_to(ROOT).as_posix(), str(ROOT), config.site_dir,
                          config.use_directory_urls))
    for path in sorted((ROOT / SHIPPED).iterdir()):
        uri = shipped_uri(path.name)
        if uri is None:
            continue
        if files.get_file_from_path(uri) is not None:
            raise PluginError(f"docs/{uri} and {SHIPPED}/{path.name} are two copies: keep "
                              f"the shipped one only")
        file = File(uri, None, config.site_dir, config.use_directory_urls)
        file.abs_src_path = str(path)  # served from the package, not from docs/
        files.append(file)
    return files


def shipped_uri(name: str) -> str | None:
    """Where the site serves a file of the shipped results (None: not served)."""
    if name.endswith(".json"):
        return f"experiments/results/{name}"
    if name.endswith(".png"):
        return f"experiments/{name}"
    return None


def linked_names(markdown: str) -> str:
    """The markdown with each dotted gptlab name in backticks outside code blocks an optional
    reference."""
    lines, in_code = [], False
    for line in markdown.splitlines(keepends=True):
        if FENCE.match(line):
            in_code = not in_code
        elif not in_code:
            line = NAME.sub(r'<autoref identifier="\1" optional><code>\1</code></autoref>', line)
        lines.append(line)
    return "".join(lines)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    return linked_names(markdown)
