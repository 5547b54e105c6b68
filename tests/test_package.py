"""The package's shape, read from its source: imports point one way, down the layers
docs/ARCHITECTURE.md lists, and form no cycle between modules or between subpackages (imports
inside functions counted); every import inside a function says why it is there; every module
has its test file at the mirrored path."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import gptlab

SRC = Path(gptlab.__file__).parent
FRONT_ENDS = ("gptlab.cli", "gptlab.lab", "gptlab.__main__")
ARCHITECTURE = Path(__file__).parents[1] / "docs" / "ARCHITECTURE.md"
TESTS = Path(__file__).parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def imported(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The names an import statement binds, resolved to modules of the package where they
    are modules (`from gptlab.model import gpt` imports gptlab.model.gpt)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        up = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(up + ([base] if base else []))
    subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
    return subs if len(subs) == len(node.names) else [base, *subs]


def graph() -> tuple[dict[str, set[str]], dict[str, set[str]],
                     list[tuple[str, int, list[str]]]]:
    """(module -> the package's modules it imports at run time, module -> those it imports
    at all (`if TYPE_CHECKING:` blocks too), [(module, line, lines above)] for every import
    inside a function)."""
    edges, typed, inner = {m: set() for m in MODULES}, {m: set() for m in MODULES}, []
    for name, path in MODULES.items():
        source = path.read_text()
        tree = ast.parse(source)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        top = {id(n) for n in tree.body}
        guarded = {id(n) for node in tree.body if isinstance(node, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
        lines = source.splitlines()
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets = {m for m in imported(node, package) if m in MODULES and m != name}
            typed[name].update(targets)
            if id(node) in guarded:
                continue
            edges[name].update(targets)
            if id(node) not in top:
                inner.append((name, node.lineno, lines[: node.lineno]))
    return edges, typed, inner


EDGES, TYPED_EDGES, INNER = graph()


def unit(module: str) -> str:
    """What a module belongs to in the layers: its subpackage (`model` for gptlab.model.gpt),
    itself at the top of the package (`loading`), `__init__` for the package's own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def between_units(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph folded onto subpackages and top-level modules."""
    units: dict[str, set[str]] = {unit(m): set() for m in edges}
    for module, targets in edges.items():
        units[unit(module)].update(unit(t) for t in targets if unit(t) != unit(module))
    return units


def layers(architecture: str) -> list[list[str]]:
    """The rows of ARCHITECTURE.md's table "The subpackages ..., lowest first", lowest first:
    each row is a layer, named by the backquoted names in its first cell (`model/` -> model)."""
    section = architecture.split("## The subpackages", 1)[1].split("\n## ", 1)[0]
    cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return [re.findall(r"`(\w+)/?`", cell) for cell in cells]


LAYERS = layers(ARCHITECTURE.read_text())
LAYER = {name: row for row, names in enumerate(LAYERS) for name in names}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_the_scan_sees_the_package():
    assert {"gptlab.model.gpt", "gptlab.cli.main", "gptlab.lab.server"} <= set(MODULES)
    assert "gptlab.model.attention" in EDGES["gptlab.model.gpt"]
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]


def test_no_import_cycles_counting_imports_inside_functions():
    assert cycles(EDGES) == []


def test_the_layers_are_read_from_the_architecture_page():
    table = ("## The subpackages, lowest first\n| package | one line |\n|---|---|\n"
             "| `errors`, `fields` | the `model/` below |\n| `model/` | x |\n"
             "## Next\n| `cli/` | y |")
    assert layers(table) == [["errors", "fields"], ["model"]]
    assert LAYER["errors"] == LAYER["version"] < LAYER["model"] < LAYER["training"] < LAYER["cli"]
    assert between_units({"gptlab.a.x": {"gptlab.a.y", "gptlab.b"}, "gptlab.a.y": set(),
                          "gptlab.b": {"gptlab"}, "gptlab": set()}) == {
        "a": {"b"}, "b": {"__init__"}, "__init__": set()}


def test_no_import_cycles_between_subpackages():
    """Folded onto subpackages (and top-level modules), imports inside functions and under
    TYPE_CHECKING counted: data -> files -> data would be a cycle here even when no module
    imports itself back."""
    units = between_units(TYPED_EDGES)
    assert "files" in units["model"] and "model" in units["training"]
    assert cycles(units) == []


def test_every_subpackage_has_one_layer():
    named = [name for names in LAYERS for name in names]
    assert len(named) == len(set(named))
    assert set(named) == set(between_units(TYPED_EDGES))


def test_every_import_points_down_the_layers():
    """A module imports from its own layer or a lower one (an earlier row of the table)."""
    upward = sorted(f"{m} -> {t}" for m, targets in TYPED_EDGES.items() for t in targets
                    if LAYER.get(unit(t), -1) > LAYER.get(unit(m), -1))
    assert upward == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith(FRONT_ENDS)))
def test_the_library_never_imports_its_front_ends_or_the_benchmarks(module):
    upward = sorted(m for m in EDGES[module] if m.startswith(FRONT_ENDS))
    tree = ast.parse(MODULES[module].read_text())
    bench = [n.lineno for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
             and any(name.split(".")[0] in ("bench", "tools", "tests")
                     for name in imported(n, module.rpartition(".")[0]))]
    assert upward == [] and bench == []


def explained(above: list[str]) -> bool:
    """Whether the import on the last of these lines has a comment on its line, or above
    the block of imports (blank lines and parenthesised names included) it belongs to."""
    for line in reversed(above):
        text = line.strip()
        if "#" in text:
            return True
        if not (text == "" or text.startswith(("import ", "from ", ")")) or text.endswith(",")):
            return False
    return False


def test_every_import_inside_a_function_says_why():
    """An import inside a function is for an optional extra or for start-up time; the
    comment above its block (or on its line) says which."""
    assert explained(["def f():", "    # start-up time", "    import torch", "",
                      "    from gptlab import x"])
    assert not explained(["def f():", '    """Doc."""', "    import torch"])
    assert [f"{m}:{line}" for m, line, above in INNER if not explained(above)] == []


# The run directory's format has one owner: no other module reads a safetensors header
# (safe_open, or struct by hand) or takes, tests or names a run's lock (fcntl, flock,
# LOCK_FILE). files.kinds declares the lock's name, which its folder rule ignores; the model
# directory's owner reads its weights through safe_open, for its own key in their header
# (the tensors' checksum), never a run's.
RUN_FORMAT_OWNER = "gptlab.training.rundir"
RUN_FORMAT = frozenset({"safe_open", "struct", "fcntl", "flock", "LOCK_FILE"})
RUN_FORMAT_ALLOWED = {RUN_FORMAT_OWNER: RUN_FORMAT, "gptlab.files.kinds": {"LOCK_FILE"},
                      "gptlab.model_dir": {"safe_open"}}


def run_format_uses(source: str) -> set[str]:
    """The names of RUN_FORMAT a module's source imports or uses."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.update([(node.module or "").split(".")[0], *(a.name for a in node.names)])
        elif isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
    return found & RUN_FORMAT


def test_one_module_reads_a_runs_weights_header_and_its_lock():
    assert run_format_uses("import struct\nfrom safetensors import safe_open\n"
                           "fcntl.flock(fd)\nx = kinds.LOCK_FILE") == set(RUN_FORMAT)
    uses = {m: run_format_uses(p.read_text()) for m, p in MODULES.items()}
    assert uses[RUN_FORMAT_OWNER] == {"safe_open", "fcntl", "flock", "LOCK_FILE"}
    assert {m: sorted(found - RUN_FORMAT_ALLOWED.get(m, set()))
            for m, found in uses.items() if found - RUN_FORMAT_ALLOWED.get(m, set())} == {}


def mirrored_test(path: Path) -> Path:
    """Where a module's tests live: tests/<subpackage>/test_<module>.py, tests/test_<module>.py
    for a top-level one."""
    relative = path.relative_to(SRC)
    return TESTS.joinpath(*relative.parent.parts, f"test_{relative.name}")


def test_every_module_has_a_test_file_at_its_mirrored_path():
    assert mirrored_test(SRC / "model" / "gpt.py") == TESTS / "model" / "test_gpt.py"
    assert mirrored_test(SRC / "fields.py") == TESTS / "test_fields.py"
    missing = sorted(str(mirrored_test(p).relative_to(TESTS.parent)) for p in MODULES.values()
                     if p.name not in ("__init__.py", "__main__.py")
                     and not mirrored_test(p).is_file())
    assert not missing, f"{len(missing)} module(s) without their test file: {', '.join(missing)}"


LAYOUT = Path(__file__).parents[1] / "docs" / "layout.md"


def layout_sections() -> dict[str, str]:
    """docs/layout.md's tree, as {entry at the top of src/gptlab/: its text}."""
    tree = LAYOUT.read_text().split("```\n", 2)[1]
    sections: dict[str, str] = {}
    entry = None
    for line in tree.splitlines():
        named = re.match(r"^  (\w+)/?(?:\s|$)", line)
        if named:
            entry = named.group(1)
        elif not line.startswith("   "):
            entry = None  # tests/, bench/ and the rest: not the package
        if entry is not None:
            sections[entry] = sections.get(entry, "") + " " + line
    return sections


def test_the_layout_page_names_every_module():
    """docs/layout.md names each module of the package, in its subpackage's entry (a
    top-level module has its own), so a reader can find any file from it."""
    sections = layout_sections()
    assert "model" in sections and "attention" in sections["model"]
    missing = []
    for path in MODULES.values():
        relative = path.relative_to(SRC)
        if path.name in ("__init__.py", "__main__.py"):
            continue
        if len(relative.parts) == 1:
            named = relative.stem in sections
        else:
            text = sections.get(relative.parts[0], "")
            named = re.search(rf"\b{re.escape(relative.stem)}\b", text) is not None
        if not named:
            missing.append(relative.as_posix())
    assert not missing, f"docs/layout.md does not name: {', '.join(missing)}"

