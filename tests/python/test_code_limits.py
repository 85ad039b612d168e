"""Product code stays readable in small pieces: no file over 500 lines, no function over 60.

Product code is the compiler (``python/cortex_m_nn``), the west command, the kernels, the C++
API and the Zephyr module's CMake. A file or function may exceed a limit only when it is
listed in ``EXCEPTIONS`` with the reason; an exception that is no longer needed fails too, so
the list cannot go stale.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 60

PYTHON = ("python/cortex_m_nn", "west_commands")
CPP = ("kernels", "src", "include")
OTHER = ("cmake", "kernels/CMakeLists.txt", "CMakeLists.txt")

#: ``path`` or ``path::function`` → why it may be longer than the limit.
EXCEPTIONS: dict[str, str] = {}


def _files(roots: tuple[str, ...], suffixes: tuple[str, ...]) -> list[Path]:
    found: list[Path] = []
    for root in roots:
        path = ROOT / root
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        found += [p for p in candidates if p.is_file() and p.name.endswith(suffixes)]
    return found


def python_functions(source: str) -> list[tuple[str, int]]:
    """(qualified name, lines) of every function and method, nested ones included."""
    functions: list[tuple[str, int]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    functions.append((name, child.end_lineno - child.lineno + 1))
                walk(child, f"{name}.")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return functions


#: ``type name(`` at column 0: a return type, then the (qualified) name and its parenthesis.
_CPP_HEAD = re.compile(r"^(?:[\w:<>,]+[\s*&]+)+(?P<name>[~\w:]+)\s*\([^;]*$")
_NOT_FUNCTIONS = ("namespace", "extern", "struct", "class", "enum", "union", "template")


def cpp_functions(source: str) -> list[tuple[str, int]]:
    """(name, lines) of the functions defined at namespace level in a C++ file.

    The project's C++ is formatted with definitions starting at column 0 (namespaces are not
    indented) and closing with ``}`` at column 0; a definition spans from its first line to
    that brace. Declarations, namespaces, classes and macros are not functions.
    """
    functions: list[tuple[str, int]] = []
    lines = source.splitlines()
    start: tuple[str, int] | None = None
    opened = False
    for number, line in enumerate(lines):
        if start is None:
            match = _CPP_HEAD.match(line)
            if match and not line.startswith(_NOT_FUNCTIONS):
                start, opened = (match["name"], number), "{" in line
        elif not opened:
            opened = "{" in line
            if not opened and line.rstrip().endswith(";"):
                start = None  # a declaration spanning lines
        elif line.startswith("}"):
            functions.append((start[0], number - start[1] + 1))
            start = None
    return functions


def _violations() -> dict[str, str]:
    found: dict[str, str] = {}
    every = (
        _files(PYTHON, (".py",))
        + _files(CPP, (".cpp", ".h"))
        + _files(OTHER, (".cmake", "CMakeLists.txt"))
    )
    for path in every:
        relative = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MAX_FILE_LINES:
            found[relative] = f"{lines} lines"
        if path.suffix == ".py":
            functions = python_functions(text)
        elif path.suffix in (".cpp", ".h"):
            functions = cpp_functions(text)
        else:
            functions = []
        for name, length in functions:
            if length > MAX_FUNCTION_LINES:
                found[f"{relative}::{name}"] = f"{length} lines"
    return found


def test_product_code_is_within_the_limits() -> None:
    over = {where: size for where, size in _violations().items() if where not in EXCEPTIONS}
    assert not over, (
        f"over {MAX_FILE_LINES} lines per file / {MAX_FUNCTION_LINES} per function "
        f"(split it, or list it in EXCEPTIONS with the reason): {over}"
    )


def test_every_exception_is_still_needed() -> None:
    stale = sorted(set(EXCEPTIONS) - set(_violations()))
    assert not stale, f"no longer over a limit, remove from EXCEPTIONS: {stale}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n    return 1\n", [("f", 2)]),
        (
            "class A:\n    def m(self):\n        def inner():\n            pass\n        "
            "return inner\n",
            [("A.m", 4), ("A.m.inner", 2)],
        ),
    ],
)
def test_python_functions_are_measured(source: str, expected: list[tuple[str, int]]) -> None:
    assert python_functions(source) == expected


def test_cpp_functions_are_measured() -> None:
    source = "\n".join(
        [
            "namespace cortex_m_nn {",
            "int declared(int a);",
            "static_assert(sizeof(int) == 4,",
            '              "int");',
            "inline bool fits(int64_t value,",
            "                 int64_t other) {",
            "  if (value) {",
            "    return true;",
            "  }",
            "  return false;",
            "}",
            "struct S {",
            "  int x;",
            "};",
            "void Model::run() { step(); }",
            "Status check(const Program& program,",
            "             char* out);",
            "const char* to_string(Status status) {",
            '  return "";',
            "}",
            "}  // namespace cortex_m_nn",
        ]
    )
    assert cpp_functions(source) == [("fits", 7), ("to_string", 3)]
