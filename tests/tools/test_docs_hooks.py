"""The site's hook (tools/docs_hooks.py): BENCHMARKS.md's figures join the site at the paths
BENCHMARKS.md links them by, so the page that includes it shows them; the shipped
experiment results and figures (package data) join it where docs/experiments.md links
them, and a second copy in docs/ is an error."""

import re
from pathlib import Path

import pytest
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from tools.docs_hooks import FIGURES, linked_names, on_files, shipped_uri

from gptlab.experiments import shipped_results

ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmarks_figures_join_the_site(tmp_path):
    config = MkDocsConfig()
    config.load_dict({"site_dir": str(tmp_path / "site"), "use_directory_urls": True})
    files = [f for f in on_files(Files([]), config) if f.src_uri.startswith(FIGURES)]
    added = {file.src_uri for file in files}
    linked = set(re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)",
                            (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")))
    assert linked and linked <= added
    assert all((ROOT / uri).is_file() for uri in added)
    assert all(Path(file.abs_dest_path).parent.parent.parent == tmp_path / "site"
               for file in files)


def _config(tmp_path):
    config = MkDocsConfig()
    config.load_dict({"site_dir": str(tmp_path / "site"), "use_directory_urls": True})
    return config


def test_the_shipped_results_join_the_site_where_the_experiments_page_links_them(tmp_path):
    files = {f.src_uri: f for f in on_files(Files([]), _config(tmp_path))}
    for path in sorted(shipped_results.FOLDER.iterdir()):
        if path.is_dir():  # a shipped dictionary (features-sae/): package data the lab opens
            assert shipped_uri(path.name) is None
            continue
        uri = shipped_uri(path.name)
        assert uri is not None, path.name
        assert Path(files[uri].abs_src_path) == path
        assert Path(files[uri].abs_dest_path) == tmp_path / "site" / uri
    page = (ROOT / "docs" / "experiments.md").read_text(encoding="utf-8")
    for link in re.findall(r"\]\((experiments/[^)\s]+)\)", page):
        assert link in files, link


def test_a_second_copy_in_docs_is_an_error(tmp_path):
    config = _config(tmp_path)
    docs = Files([File("experiments/norm.png", str(tmp_path), config.site_dir, True)])
    with pytest.raises(PluginError, match="two copies"):
        on_files(docs, config)


def test_names_in_the_prose_become_optional_references_and_code_stays_code():
    markdown = ("`gptlab.training.footprint` estimates; `gptlab.load(path)` loads\n"
                "```\n`gptlab.training.footprint`\n```\n")
    lines = linked_names(markdown).splitlines()
    assert lines[0] == ('<autoref identifier="gptlab.training.footprint" optional>'
                        "<code>gptlab.training.footprint</code></autoref> estimates; "
                        "`gptlab.load(path)` loads")
    assert lines[1:] == ["```", "`gptlab.training.footprint`", "```"]
