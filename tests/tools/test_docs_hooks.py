"""The site's hook (tools/docs_hooks.py): BENCHMARKS.md's figures join the site at the paths
BENCHMARKS.md links them by, so the page that includes it shows them."""

import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from tools.docs_hooks import linked_names, on_files

ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmarks_figures_join_the_site(tmp_path):
    config = MkDocsConfig()
    config.load_dict({"site_dir": str(tmp_path / "site"), "use_directory_urls": True})
    files = on_files(Files([]), config)
    added = {file.src_uri for file in files}
    linked = set(re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)",
                            (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")))
    assert linked and linked <= added
    assert all((ROOT / uri).is_file() for uri in added)
    assert all(Path(file.abs_dest_path).parent.parent.parent == tmp_path / "site"
               for file in files)


def test_names_in_the_prose_become_optional_references_and_code_stays_code():
    markdown = ("`gptlab.training.footprint` estimates; `gptlab.load(path)` loads\n"
                "```\n`gptlab.training.footprint`\n```\n")
    lines = linked_names(markdown).splitlines()
    assert lines[0] == ('<autoref identifier="gptlab.training.footprint" optional>'
                        "<code>gptlab.training.footprint</code></autoref> estimates; "
                        "`gptlab.load(path)` loads")
    assert lines[1:] == ["```", "`gptlab.training.footprint`", "```"]
