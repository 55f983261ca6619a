"""The package's imports run one way (docs/design.md, "Layers").

A room is a subpackage of ``trtllm_autojudge`` or a module at its top. Every module is parsed with
``ast``, imports inside functions included, relative or absolute; a room may import only the rooms
of the layers below its own.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "trtllm_autojudge"
NAME = PACKAGE.name

# bottom to top, the picture of docs/design.md
LAYERS = [
    ("spec", "kernels", "cache_dir", "dtype_record"),
    ("data", "judge", "ops"),
    ("tasks",),
    ("models",),
    ("decoding", "generation"),
    ("mining", "trt"),
    ("evaluation", "serving"),
    ("cli", "demo", "generate"),
]
LAYER = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}


def modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that module ``name`` imports (``from X import m`` counts X.m when m is a module)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in known)
    return {m for m in found if m == NAME or m.startswith(NAME + ".")}


def room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def room_edges() -> dict[tuple[str, str], list[str]]:
    """(importing room, imported room) -> the imports behind it, as ``module -> module``."""
    known = modules()
    edges = defaultdict(list)
    for name, path in known.items():
        for target in sorted(imports(name, path, set(known))):
            a, b = room(name), room(target)
            if a != b and b is not None:
                edges[a, b].append(f"{name} -> {target}")
    return edges


def test_every_room_has_one_layer():
    rooms = {room(name) for name in modules()} - {None}
    listed = [r for layer in LAYERS for r in layer]
    assert len(listed) == len(set(listed)), "a room is listed twice"
    assert rooms - set(listed) == set(), "rooms missing from LAYERS (and from the picture in docs/design.md)"
    assert set(listed) - rooms == set(), "LAYERS lists rooms the package does not have"


def test_the_package_init_imports_nothing():
    assert imports(NAME, PACKAGE / "__init__.py", set(modules())) == set()


def test_the_room_graph_has_no_cycle():
    edges = room_edges()
    graph = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    state, stack = {}, []

    def visit(r):  # depth-first; returns a cycle as a list of rooms, or None
        state[r] = "open"
        stack.append(r)
        for s in sorted(graph[r]):
            if state.get(s) == "open":
                return stack[stack.index(s):] + [s]
            if s not in state and (cycle := visit(s)):
                return cycle
        state[r] = "done"
        stack.pop()
        return None

    for r in sorted(graph):
        if r not in state and (cycle := visit(r)):
            behind = [edges[a, b][0] for a, b in zip(cycle, cycle[1:])]
            raise AssertionError(f"rooms import each other in a cycle {' -> '.join(cycle)}: {behind}")


def test_imports_run_down_the_layers():
    upward = [f"{line} ({a}, layer {LAYER[a]}, imports {b}, layer {LAYER[b]})"
              for (a, b), lines in sorted(room_edges().items()) if a in LAYER and b in LAYER and LAYER[b] >= LAYER[a]
              for line in lines]
    assert upward == []
