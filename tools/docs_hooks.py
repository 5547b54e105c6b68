"""MkDocs hooks (mkdocs.yml): what the site shows from outside docs/.

docs/benchmarks-full.md includes BENCHMARKS.md (pymdownx.snippets), whose figures are
bench/results/*.png, beside the benchmarks that write them. They join the site at the same
relative paths, so BENCHMARKS.md's image links work both on GitHub and in the site.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
FIGURES = "bench/results"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the benchmarks' figures to the site's files."""
    for path in sorted((ROOT / FIGURES).glob("*.png")):
        files.append(File(path.relative_to(ROOT).as_posix(), str(ROOT), config.site_dir,
                          config.use_directory_urls))
    return files
