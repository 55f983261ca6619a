"""The house stays readable: the README and the results page within their budgets, rooms by job.

- ``README.md`` <= 130 lines and ``docs/results.md`` <= 350: detail and history go to the dated lab
  notebook (``docs/notebook/``), leaving one sentence and a link.
- ``build_scripts/`` holds what a user runs to build or train (fewer than 12 files); research probes
  live in ``experiments/``, each opening with its question and the notebook section it backs, each
  listed in ``experiments/README.md``.
- Dependencies run one way: scripts import the package, never the other way round, and the build
  scripts import no probe.
"""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "trtllm_autojudge"
BUILD = REPO / "build_scripts"
EXPERIMENTS = REPO / "experiments"

README_BUDGET = 130
RESULTS_BUDGET = 350
BUILD_FILES_BELOW = 12



def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_readme_within_its_budget():
    n = lines(REPO / "README.md")
    assert n <= README_BUDGET, (
        f"README.md has {n} lines, over its budget of {README_BUDGET}. The README's first screen says what "
        f"this is, the two commands and one results table; move the rest to docs/results.md (current numbers) "
        f"or to docs/notebook/ (levers, history, superseded rows), leaving one sentence and a link")


def test_results_page_within_its_budget():
    n = lines(REPO / "docs" / "results.md")
    assert n <= RESULTS_BUDGET, (
        f"docs/results.md has {n} lines, over its budget of {RESULTS_BUDGET}. It holds the current state "
        f"only: move superseded sections verbatim to docs/notebook/ (a dated file, e.g. "
        f"docs/notebook/results-YYYY-MM-DD.md), fix the links that pointed at them (grep for 'results.md#') "
        f"and leave one line pointing there")


def test_build_scripts_hold_only_build_steps():
    files = sorted(p.name for p in BUILD.iterdir() if p.is_file())
    assert len(files) < BUILD_FILES_BELOW, (
        f"build_scripts/ holds {len(files)} files ({', '.join(files)}), {BUILD_FILES_BELOW} or more: it keeps "
        f"what a user runs to build or train. A research probe belongs in experiments/, its docstring opening "
        f"with its question and the notebook section it backs, with a row in experiments/README.md")


def probes() -> list[Path]:
    return sorted(EXPERIMENTS.glob("*.py"))


def test_every_probe_is_indexed_and_says_what_it_is_for():
    index = (EXPERIMENTS / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([\w]+\.py)` \|", index, flags=re.M))
    names = {p.name for p in probes()}
    assert names - listed == set(), f"experiments/README.md does not list {sorted(names - listed)}"
    assert listed - names == set(), f"experiments/README.md lists probes that do not exist: {sorted(listed - names)}"
    for path in probes():
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        opening = doc.split("\n\n")[0]
        assert "?" in opening, f"{path.name}: its docstring should open with the question it answers"
        assert "notebook/" in opening, f"{path.name}: its docstring's opening should name the notebook section it backs"


def docstring_nodes(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (module, class, function)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def reaches(path: Path, folders: tuple[str, ...]) -> list[str]:
    """How module ``path`` reaches into ``folders`` (repository folders of scripts): absolute imports of
    their scripts as modules, and string constants that name a path under them (``sys.path`` entries,
    ``runpy`` / ``importlib`` loads). Docstrings and messages (text with spaces) do not count."""
    modules = set(folders) | {p.stem for folder in folders for p in (REPO / folder).glob("*.py")}
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    docs = docstring_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in modules]
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in modules:
            found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = node.value
            if not re.search(r"\s", text) and any(text == f or text.startswith(f + "/") for f in folders):
                found.append(f"path {text!r} (line {node.lineno})")
    return found


def test_the_package_imports_nothing_from_the_scripts():
    upward = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        into_experiments = reaches(path, ("experiments",))
        into_build = reaches(path, ("build_scripts",))
        if into_experiments or into_build:
            upward[rel] = into_experiments + into_build
    assert upward == {}, (
        f"the package reaches into build_scripts/ or experiments/: {upward}. Scripts import the package, never "
        f"the other way round: move what the package needs into it and let the script import it")


def test_build_scripts_import_no_probe():
    found = {p.name: hits for p in sorted(BUILD.glob("*.py")) if (hits := reaches(p, ("experiments",)))}
    assert found == {}, f"build scripts reach into experiments/: {found}; a build step must not depend on a probe"


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *patterns],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    return [REPO / f for f in out if (REPO / f).is_file()]


def test_docs_and_scripts_cite_scripts_that_exist():
    """A path ``build_scripts/X.py`` or ``experiments/X.py`` named in the docs, the scripts or the tests
    exists, unless the same file says how to get it back (``git show COMMIT:PATH``)."""
    missing = []
    for path in tracked("README.md", "docs/*.md", "build_scripts/*", "experiments/*", "tests/*.py", "examples/*", "scripts/*"):
        text = path.read_text(encoding="utf-8", errors="replace")
        recovered = set(re.findall(r"git show [0-9a-f]{7,40}:(\S+?\.py)", text))
        for cited in sorted(set(re.findall(r"\b((?:build_scripts|experiments)/[a-z_][a-z0-9_]*\.py)\b", text))):
            if not (REPO / cited).is_file() and cited not in recovered:
                missing.append(f"{path.relative_to(REPO)}: {cited}")
    assert missing == [], f"these files cite scripts that do not exist (moved? say where): {missing}"
