"""The documentation stays true to the code: every excerpt attributed to a file occurs in it
verbatim, and every repository path a page names exists.

An excerpt is a fenced code block whose paragraph before it ends with a path in backticks and
a colon (``From `kernels/op_mul.cpp`:``); blocks that follow it directly belong to the same
file. ``<name>`` in a path stands for the operator the page shows (``mul``). ``ruff format`` also
formats a page's Python blocks (test_style.py): excerpt whole statements at their own
indentation, so that formatting leaves them as the file has them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
#: Pages that quote this repository's files: their excerpts and paths must stay true. (The
#: Zephyr verification list and the int16 survey cite paths in Zephyr's, ExecuTorch's,
#: CMSIS-NN's and TFLite Micro's repositories instead.)
WALKTHROUGHS = [page for page in DOCS if page.name not in ("zephyr-verification.md", "int16.md")]
#: Reference pages (moved from the README): they name paths, but quote no file.
REFERENCES = {"cli.md", "memory.md", "operators.md", "python-api.md", "testing.md", "zephyr.md"}
#: What ``<name>`` stands for in the paths of a page.
EXAMPLE_OPERATOR = "mul"

ATTRIBUTION = re.compile(r"`([^`\s]+/[^`\s]+|[^`\s/]+\.\w+)`:\s*$")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
TOP_LEVEL = ("python/", "kernels/", "tests/", "docs/", "benchmarks/", "zephyr/", "west_commands/")


def excerpts(text: str) -> list[tuple[str, str]]:
    """(path, code) of every fenced block attributed to a file."""
    found: list[tuple[str, str]] = []
    attribution: str | None = None
    prose_since_block = True
    block: list[str] | None = None
    last_prose = ""
    for line in text.splitlines():
        if block is not None:
            if line.startswith("```"):
                if attribution is not None:
                    found.append((attribution, "\n".join(block)))
                block = None
                prose_since_block = False
            else:
                block.append(line)
        elif line.startswith("```"):
            if prose_since_block:
                match = ATTRIBUTION.search(last_prose)
                attribution = match.group(1) if match else None
            block = []
        elif line.strip():
            last_prose = line
            prose_since_block = True
    assert block is None, "unclosed code block"
    return found


def mentioned_paths(text: str) -> set[str]:
    """Repository paths in code spans outside code blocks."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    paths = set()
    for span in CODE_SPAN.findall(prose):
        if " " not in span and span.startswith(TOP_LEVEL):
            paths.add(span)
    return paths


def resolve(path: str) -> Path:
    return ROOT / path.replace("<name>", EXAMPLE_OPERATOR)


def test_there_are_docs() -> None:
    assert (ROOT / "docs" / "adding-an-operator.md") in DOCS


@pytest.mark.parametrize("page", WALKTHROUGHS, ids=lambda p: p.name)
def test_excerpts_occur_in_their_files(page: Path) -> None:
    found = excerpts(page.read_text())
    assert found or page.name in REFERENCES, f"{page.name} has no attributed excerpts"
    for path, code in found:
        source = resolve(path)
        assert source.is_file(), f"{page.name}: excerpt from {path}, which does not exist"
        assert code in source.read_text(), f"{page.name}: this excerpt is not in {path}:\n{code}"


@pytest.mark.parametrize("page", WALKTHROUGHS, ids=lambda p: p.name)
def test_mentioned_paths_exist(page: Path) -> None:
    text = page.read_text()
    missing = sorted(p for p in mentioned_paths(text) if not resolve(p).exists())
    assert not missing, f"{page.name} names paths that do not exist: {missing}"
    for target in LINK.findall(text):
        if not re.match(r"[a-z]+:", target):
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def test_excerpt_parsing() -> None:
    text = (
        "From `a/b.py`:\n\n```python\nx = 1\n```\n\n```python\ny = 2\n```\n\n"
        "Not attributed:\n\n```sh\nrun\n```\n"
    )
    assert excerpts(text) == [("a/b.py", "x = 1"), ("a/b.py", "y = 2")]


def test_every_block_of_the_operator_page_but_commands_is_an_excerpt() -> None:
    """Attribution is not silently lost: only the shell command is no file's excerpt."""
    text = (ROOT / "docs" / "adding-an-operator.md").read_text()
    blocks = len(re.findall(r"^```\w", text, flags=re.M))
    commands = len(re.findall(r"^```sh$", text, flags=re.M))
    found = excerpts(text)
    assert len(found) == blocks - commands
    assert {path for path, _ in found} >= {
        "python/cortex_m_nn/ops/mul.py",
        "python/cortex_m_nn/lower/rules/mul.py",
        "kernels/op_mul.cpp",
        "python/cortex_m_nn/ops/operators.yaml",
        "tests/python/ops/test_elementwise.py",
        "tests/kernels/test_elementwise.py",
    }


def test_readme_links_the_docs() -> None:
    readme = (ROOT / "README.md").read_text()
    for page in DOCS:
        assert f"](docs/{page.name})" in readme, f"README does not link docs/{page.name}"
