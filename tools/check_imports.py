"""Import rules that ruff and mypy cannot see, checked in ``nox -s lint``.

1. **The plugin surface.** Method and dataset plugins (``methods/``, ``datasets/`` and the test plugins) import
   nothing of the harness but :mod:`distrepro.api`: everything they may rely on is there, typed, and the rest of
   the package can change without breaking a user's plugin.
2. **No import cycle between modules** of ``distrepro`` (function-level imports included: a lazy import is still a
   dependency). Found with grimp, the graph library import-linter is built on; each cycle is printed as a chain.
3. **Names without stutter**: a module's name does not repeat its package's (``inprocess/comm.py``, not
   ``inprocess/inprocess_comm.py``: the path already says it), and the package's top level holds at most
   ``MAX_TOP_LEVEL`` modules beside its subpackages, so a newcomer finds a thing by its folder, then its name.
   Two engines may each have a ``comm.py``: the folder tells them apart, as ``torch.distributed`` and
   ``torch.multiprocessing`` do.

Exit status 1 with one line per finding; 0 and a summary when the rules hold.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "distrepro"
SURFACE = "distrepro.api"
PLUGIN_FOLDERS = ("methods", "datasets", "tests/_support/plugins")
MAX_TOP_LEVEL = 12


def plugin_import_findings(root: Path = ROOT) -> list[str]:
    """Every import of ``distrepro`` in a plugin file that is not the surface (``from distrepro import api`` or
    ``import distrepro.api`` / ``from distrepro.api import X``)."""
    out = []
    for folder in PLUGIN_FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    inner = node.module == PACKAGE
                    names = [f"{PACKAGE}.{a.name}" for a in node.names] if inner else [node.module]
                for name in names:
                    inside = name == PACKAGE or name.startswith(PACKAGE + ".")
                    if inside and not (name == SURFACE or name.startswith(SURFACE + ".")):
                        rel = path.relative_to(root)
                        out.append(f"{rel}:{node.lineno}: imports {name}; plugins import only {SURFACE}")
    return out


def _sccs(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start) & modules)))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child) & modules))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
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
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def cycle_findings(graph: grimp.ImportGraph) -> list[str]:
    out = []
    modules = {m for m in graph.modules if m == PACKAGE or m.startswith(PACKAGE + ".")}
    for component in _sccs(graph, modules):
        first = component[0]
        back = min(
            (graph.find_shortest_chain(importer=other, imported=first) or () for other in component[1:]),
            key=len,
        )
        chain = graph.find_shortest_chain(importer=first, imported=back[0]) if back else None
        shown = " -> ".join([*(chain or (first,)), *back[1:]])
        out.append(f"import cycle among {len(component)} modules: {shown}")
    return out


def naming_findings(root: Path = ROOT) -> list[str]:
    package = root / PACKAGE
    files = [p for p in package.rglob("*.py") if p.name != "__init__.py" and "_shipped" not in p.parts]
    out = [
        f"{p.relative_to(root)}: the module name repeats its package's ({p.parent.name}/); drop the prefix"
        for p in sorted(files)
        if p.stem.startswith(p.parent.name + "_") or p.stem == p.parent.name
    ]
    top = sorted(p.name for p in package.glob("*.py") if p.name != "__init__.py")
    if len(top) > MAX_TOP_LEVEL:
        out.append(f"{PACKAGE}/ holds {len(top)} modules at its top level (at most {MAX_TOP_LEVEL}): {', '.join(top)}")
    return out


def main() -> int:
    sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    findings = plugin_import_findings() + cycle_findings(graph) + naming_findings()
    for line in findings:
        print(line)
    if findings:
        return 1
    n = len([m for m in graph.modules if m.startswith(PACKAGE)])
    print(f"imports: {n} modules, no cycle; plugins import only {SURFACE}; no module name repeats its package's")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
