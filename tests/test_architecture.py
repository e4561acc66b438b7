"""The package's layout (docs/architecture.md): imports point one way, from the commands down to
the file reader, and no module imports itself back through others. Every import statement counts,
those inside functions too (a late import delays a dependency, it does not remove it); only a
block under `if TYPE_CHECKING:` is exempt, since it never runs."""

from __future__ import annotations

import ast
from pathlib import Path

import onnx_roofline

PACKAGE = Path(onnx_roofline.__file__).parent

WINGS = ["base", "model", "shapes", "costs", "report", "analysis", "views", "commands", "api"]
"""Each wing may import the wings before it in this list, and itself; never one after it."""

BASE = {"errors", "records", "version"}  # what every wing may use: the error types, the record decorator, the version
MAX_ROOT_MODULES = 8


def wing(module: str) -> str:
    """The wing a module (dotted, below `onnx_roofline`) belongs to."""
    if module in ("", "__main__"):
        return "api"  # the public names and the script: above everything
    top = module.split(".")[0]
    if top in BASE:
        return "base"
    if top == "analysis":
        return "analysis"
    assert top in WINGS, f"onnx_roofline.{module} belongs to no wing: add it to one (docs/architecture.md)"
    return top


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _runtime_nodes(tree: ast.AST):
    """Every node of the tree but what sits under `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def imports(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the package's modules it imports (a name imported from a package counts as its
    submodule where one has that name, else as the package itself)."""
    edges: dict[str, set[str]] = {}
    for module, path in known.items():
        targets: set[str] = set()
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.split(".")[0] == "onnx_roofline"
                and not node.level
            ):
                base = node.module.removeprefix("onnx_roofline").lstrip(".")
                for alias in node.names:
                    sub = f"{base}.{alias.name}".lstrip(".")
                    targets.add(sub if sub in known else base)
            elif isinstance(node, ast.Import):
                targets.update(
                    a.name.removeprefix("onnx_roofline").lstrip(".")
                    for a in node.names
                    if a.name.split(".")[0] == "onnx_roofline"
                )
            assert not (isinstance(node, ast.ImportFrom) and node.level), f"{path}: relative import"
        edges[module] = targets - {module}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _package_parents(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """Importing `a.b.c` runs `a/__init__` and `a/b/__init__` first: those are imports too."""
    with_parents = {module: set(targets) for module, targets in edges.items()}
    for module, targets in edges.items():
        for target in targets:
            parts = target.split(".")
            with_parents[module].update(
                ".".join(parts[:n]) for n in range(1, len(parts)) if ".".join(parts[:n]) in edges
            )
        with_parents[module].discard(module)
        with_parents[module] -= {
            m for m in with_parents[module] if module.startswith(m + ".")
        }  # a module's own packages are already running
    return with_parents


def test_no_import_cycles():
    edges = _package_parents(imports(modules()))
    assert cycles(edges) == []


def test_imports_point_one_way():
    rank = {name: position for position, name in enumerate(WINGS)}
    against = sorted(
        f"{module} ({wing(module)}) imports {target} ({wing(target)})"
        for module, targets in imports(modules()).items()
        for target in targets
        if rank[wing(target)] > rank[wing(module)]
    )
    assert against == []


def test_root_holds_few_modules_and_every_wing_says_its_job():
    root = [p.name for p in PACKAGE.glob("*.py")]
    assert len(root) <= MAX_ROOT_MODULES, root
    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 40, f"{init.relative_to(PACKAGE)}: its docstring says the wing's job and names"


def test_the_checker_finds_a_cycle_and_an_upward_import():
    """The checks above would fail on a broken layout (the checker itself, on made-up edges)."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert wing("model.loader") == "model" and wing("commands.cli") == "commands" and wing("errors") == "base"
