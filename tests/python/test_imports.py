"""No import cycle anywhere in ``cortex_m_nn``.

The import graph is read from the source with ``ast``: every ``import`` and ``from … import``
counts, at module level and inside functions (a lazy import is still an edge: it only hides
the cycle until the function runs). ``from package import name`` is an edge to the submodule
``package.name`` when there is one, else to ``package``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "cortex_m_nn"

Graph = Mapping[str, set[str]]


def modules(package: Path) -> dict[str, Path]:
    """Dotted module name → file, for every ``.py`` file of ``package``."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = [package.name, *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _targets(module: str, is_package: bool, node: ast.AST, known: Iterable[str]) -> list[str]:
    """The modules of ``known`` an import statement in ``module`` imports."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # relative: from the module's package, up level - 1 packages
            anchor = module.split(".")[: None if is_package else -1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        submodules = {f"{base}.{alias.name}" for alias in node.names}
        names = [name if name in known else base for name in sorted(submodules)]
    else:
        return []
    targets = []
    for name in names:
        while name and name not in known:  # import a.b.c where a.b is the module
            name = name.rpartition(".")[0]
        if name:
            targets.append(name)
    return targets


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module → the other modules of ``package`` it imports anywhere in its source."""
    known = modules(package)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            graph[name].update(_targets(name, is_package, node, known))
        graph[name].discard(name)  # a package naming its own attributes imports nothing
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """One cycle (a list of modules, the first repeated at the end) per strongly connected
    component that has one (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph.get(node, ()):
                    components.append(sorted(component))
    return [_cycle_in(graph, set(component)) for component in components]


def _cycle_in(graph: Graph, component: set[str]) -> list[str]:
    """A closed path through the component's first module (breadth-first: a shortest one)."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for successor in sorted(graph.get(node, ())):
                if successor == start:
                    return [*paths[node], start]
                if successor in component and successor not in paths:
                    paths[successor] = [*paths[node], successor]
                    following.append(successor)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a component always has one


# -- the cycle finder itself ---------------------------------------------------------------


def test_cycles_finds_a_cycle_and_only_its_members() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c", "a"]]


def test_cycles_finds_self_imports_and_separate_cycles() -> None:
    graph = {"a": {"a"}, "b": {"c"}, "c": {"b", "d"}, "d": set()}
    assert sorted(cycles(graph)) == [["a", "a"], ["b", "c", "b"]]


def test_cycles_of_an_acyclic_graph_is_empty() -> None:
    graph = {"a": {"b", "c"}, "b": {"c"}, "c": set(), "d": {"a", "c"}}
    assert cycles(graph) == []


def test_lazy_and_relative_imports_are_edges(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "first.py").write_text("def f():\n    from pkg.sub import second\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "second.py").write_text("from ..third import value\n")
    (package / "third.py").write_text("import os\nif True:\n    import pkg.first as first\n")
    graph = import_graph(package)
    assert graph["pkg.first"] == {"pkg.sub.second"}
    assert graph["pkg.sub.second"] == {"pkg.third"}
    assert graph["pkg.third"] == {"pkg.first"}
    assert cycles(graph) == [["pkg.first", "pkg.sub.second", "pkg.third", "pkg.first"]]


# -- cortex_m_nn ----------------------------------------------------------------------------


def test_the_graph_sees_the_package() -> None:
    graph = import_graph(PACKAGE)
    assert "cortex_m_nn.lower.passes" in graph["cortex_m_nn.pipeline"]
    assert "cortex_m_nn.lower.rules" in graph["cortex_m_nn.lower.passes"]
    assert len(graph) > 50


def test_no_import_cycle() -> None:
    found = cycles(import_graph(PACKAGE))
    assert not found, "import cycles:\n" + "\n".join(" → ".join(c) for c in found)


# -- layers ---------------------------------------------------------------------------------


def _edges(graph: Graph, source: str, target: str) -> list[str]:
    """``a → b`` for each import from a module of package ``source`` into one of ``target``."""

    def inside(module: str, package: str) -> bool:
        return module == package or module.startswith(package + ".")

    return [
        f"{module} → {imported}"
        for module, imported_modules in sorted(graph.items())
        if inside(module, source)
        for imported in sorted(imported_modules)
        if inside(imported, target)
    ]


def test_edges_are_found_between_packages() -> None:
    graph = {"p.a.x": {"p.b.y", "p.a.z"}, "p.a.z": set(), "p.b.y": set(), "p.ab": {"p.b.y"}}
    assert _edges(graph, "p.a", "p.b") == ["p.a.x → p.b.y"]


#: The package's floors, bottom first: each module may import its own floor and those below,
#: never one above. One folder per pipeline stage, in pipeline order, between the shared
#: vocabulary at the bottom and the front door and command line at the top.
FLOORS = (
    ("core", "version"),  # the shared vocabulary (version: read by the packaging)
    ("ops",),  # the operators: definitions and bit-exact references
    ("frontend", "nn"),  # load, export, float rewrites; nn: the layers users write
    ("quantize",),
    ("lower",),
    ("plan",),
    ("serialize",),
    ("pipeline",),  # the steps above, in order: compile_model
    ("check",),
    ("search",),  # per-layer precision searches: compile, check, choose
    ("report",),
    ("embed",),
    ("program",),  # the front door: cortex_m_nn.compile
    ("cli",),
)


def floor_of(module: str) -> int | None:
    """The floor of a ``cortex_m_nn`` module; None for the package's face (``__init__``)."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    for number, names in enumerate(FLOORS):
        if parts[1] in names:
            return number
    raise AssertionError(f"{module} stands on no floor: add it to FLOORS or move it")


def test_every_module_stands_on_one_floor() -> None:
    for module in import_graph(PACKAGE):
        floor_of(module)
    assert sum(len(names) for names in FLOORS) == len({n for names in FLOORS for n in names})


def test_no_import_runs_up_a_floor() -> None:
    """Stages import the vocabulary and earlier stages, never later ones."""
    graph = import_graph(PACKAGE)
    upward = [
        f"{module} (floor {floor_of(module)}) → {imported} (floor {floor_of(imported)})"
        for module, imported_modules in sorted(graph.items())
        for imported in sorted(imported_modules)
        if floor_of(module) is not None
        and floor_of(imported) is not None
        and floor_of(imported) > floor_of(module)  # type: ignore[operator]
    ]
    assert not upward, "imports up a floor:\n" + "\n".join(upward)


def test_the_vocabulary_imports_no_stage() -> None:
    """``core`` is the bottom: every stage may import it, and it imports nothing else of the
    package but the version."""
    graph = import_graph(PACKAGE)
    core = "cortex_m_nn.core"
    upward = [
        edge
        for edge in _edges(graph, core, "cortex_m_nn")
        if not edge.split(" → ")[1].startswith((core, "cortex_m_nn.version"))
    ]
    assert not upward, "core imports a stage:\n" + "\n".join(upward)


def test_the_quantizer_and_the_lowering_do_not_import_each_other() -> None:
    """Quantization and lowering are separate stages: what both need lives in ``core``."""
    graph = import_graph(PACKAGE)
    crossing = [
        *_edges(graph, "cortex_m_nn.quantize", "cortex_m_nn.lower"),
        *_edges(graph, "cortex_m_nn.lower", "cortex_m_nn.quantize"),
    ]
    assert not crossing, "\n".join(crossing)


def test_the_vocabulary_imports_first_in_a_fresh_interpreter() -> None:
    """core names PT2E's quantize/dequantize operators, which torch registers only when their
    module is imported: core must work when nothing else of the package was imported."""
    import subprocess
    import sys

    code = "import cortex_m_nn.core.families as f; print(len(f.QUANTIZE | f.DEQUANTIZE))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2"
