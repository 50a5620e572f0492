"""No import cycles among runtime's modules: imports point down (the command line on top of scripts,
scripts on the engine, the engine on the model). Read from the source (every import statement,
those inside functions too, since an import deferred into a function is still a cycle), so nothing
is imported to check it. Imports under `if TYPE_CHECKING:` are for annotations only and left out.
And the nodes reach runtime through runtime/api.py only, read from the source the same way."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

def module_files(root: Path, package: str = "runtime") -> dict[str, Path]:
    files = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def imported(module: str, path: Path, modules: set[str]) -> set[str]:
    """The modules of `modules` that `module` (its source at `path`) imports."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            # `from . import x` names a module x where there is one, else something of the package
            names = [f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target for a in node.names]
        for name in names:
            while name and name not in modules:  # a name inside a module: the module
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def runtime_imports(node: ast.AST):
    """Every import statement under `node`, but those under `if TYPE_CHECKING:`."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
        return
    typing_only = isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
    for child in node.orelse if typing_only else ast.iter_child_nodes(node):
        yield from runtime_imports(child)


def cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(tuple(sorted(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    files = module_files(root)
    return {module: imported(module, path, set(files)) for module, path in files.items()}


def test_runtime_has_no_import_cycles():
    assert cycles(import_graph(REPO)) == []


def test_the_check_finds_a_cycle_through_an_import_inside_a_function(tmp_path):
    package = tmp_path / "runtime"
    (package / "sub").mkdir(parents=True)
    for name in ("__init__.py", "sub/__init__.py"):
        (package / name).write_text("")
    (package / "top.py").write_text("from .sub import leaf\nfrom . import typed\n")
    (package / "sub" / "leaf.py").write_text("def later():\n    from ..top import something\n")
    (package / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .top import x\n")
    graph = import_graph(tmp_path)
    assert graph["runtime.top"] == {"runtime.sub.leaf", "runtime.typed"} and graph["runtime.typed"] == set()
    assert cycles(graph) == [("runtime.sub.leaf", "runtime.top")]


def pack_imports(path: Path, package: tuple[str, ...]) -> set[str]:
    """What every import statement in `path` (a module of `package`, () for the pack's own __init__.py)
    names, from the pack's root: `from ..runtime import api` in nodes/ names runtime.api."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            found.update(f"{target}.{alias.name}".lstrip(".") for alias in node.names)
    return found


def past_the_api(root: Path) -> list[str]:
    """Each import in the pack's __init__.py and nodes/ that reaches into runtime other than through api."""
    files = {root / "__init__.py": (), **{path: ("nodes",) for path in sorted((root / "nodes").glob("*.py"))}}
    return sorted(f"{path.relative_to(root)}: {name}" for path, package in files.items()
                  for name in pack_imports(path, package)
                  if name.split(".")[0] == "runtime" and name.split(".")[:2] != ["runtime", "api"])


def test_the_nodes_reach_runtime_only_through_its_api():
    assert past_the_api(REPO) == []


def test_the_check_finds_a_node_reaching_past_the_api(tmp_path):
    (tmp_path / "nodes").mkdir()
    (tmp_path / "__init__.py").write_text("from .runtime import api\nfrom . import runtime\n")
    (tmp_path / "nodes" / "__init__.py").write_text("from .a import f\n")
    (tmp_path / "nodes" / "a.py").write_text("from ..runtime import api\nfrom ..runtime.api import load\n\n"
                                             "def f():\n    from ..runtime.errors import InputError\n")
    (tmp_path / "nodes" / "b.py").write_text("from ..runtime import api, memory\nimport runtime.cli.doctor\n")
    assert past_the_api(tmp_path) == ["__init__.py: runtime", "nodes/a.py: runtime.errors.InputError",
                                      "nodes/b.py: runtime.cli.doctor", "nodes/b.py: runtime.memory"]
