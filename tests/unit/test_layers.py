"""The package tree keeps its layers: no import circles, no import back up the layers.

Every ``ragpulse`` import is counted, type-only ones included (``if TYPE_CHECKING:``) and
those inside functions: a circle hidden in a function is still a circle to a reader. A
``__main__`` module is an entry point, like the command line, and may import anything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ragpulse

SRC = Path(ragpulse.__file__).resolve().parent.parent

# Bottom to top: a module may import from its own rank and below, never above.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "ragpulse.errors",
        "ragpulse.semconv",
        "ragpulse._version",
        "ragpulse._guard",
        "ragpulse._bucket",
        "ragpulse._secrets",
    ),
    ("ragpulse.evaluation", "ragpulse.prompting"),
    ("ragpulse.metrics",),
    ("ragpulse.capture", "ragpulse.adapters"),
    ("ragpulse.judges",),  # the judges themselves: lexical, llm, local, and their protocol
    ("ragpulse.signals", "ragpulse.settings"),
    ("ragpulse.judging",),  # what runs a judge: processes, retries, composites, the factory
    ("ragpulse.sampling", "ragpulse.outputs"),
    ("ragpulse.worker",),
    ("ragpulse.processor",),
    (
        "ragpulse._feedback",
        "ragpulse.config",
        "ragpulse.serve",
        "ragpulse.offline",
        "ragpulse.report",
    ),
    ("ragpulse.cli", "ragpulse.demo", "ragpulse"),  # the public API and what runs on it
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / "ragpulse").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "ragpulse":
                continue
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                target = full if full in MODULES else _resolve(node.module)
                if target and target != module:
                    targets.add(target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "ragpulse":
                    target = _resolve(alias.name)
                    if target and target != module:
                        targets.add(target)
    return targets


GRAPH = {module: _imports(module) for module in MODULES}


def _rank(module: str) -> int:
    best, rank = -1, -1
    for number, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), number
    return rank


def test_every_module_has_a_layer() -> None:
    assert [m for m in MODULES if _rank(m) < 0] == []


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if not module.endswith("__main__")
        for target in targets
        if _rank(target) > _rank(module)
    )
    assert upward == []


def test_library_code_never_imports_the_command_line() -> None:
    assert (
        sorted(
            f"{module} -> {target}"
            for module, targets in GRAPH.items()
            if not module.startswith("ragpulse.cli") and not module.endswith("__main__")
            for target in targets
            if target.startswith("ragpulse.cli")
        )
        == []
    )


def test_there_is_no_import_circle() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in GRAPH[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in MODULES:
        if module not in index:
            visit(module)
    assert circles == []


def test_at_most_a_dozen_modules_stay_at_the_top_level() -> None:
    top = [p.name for p in (SRC / "ragpulse").glob("*.py")]
    assert len(top) <= 12, top
