"""The package's modules import one another without a cycle, the worker on top (as the TypeScript SDK's src/worker/).

Every import statement counts, wherever it stands: at the top, under `if TYPE_CHECKING:`, inside a function.
"""

import ast
import importlib.util
import pathlib
import tempfile
import unittest
from typing import Dict, List, Optional, Set

PACKAGE = "leasequeue"


def package_dir() -> pathlib.Path:
    """The directory of the leasequeue the tests run against, found without importing it (an import cycle may break that)."""
    spec = importlib.util.find_spec(PACKAGE)
    assert spec is not None and spec.submodule_search_locations, "leasequeue is not importable"
    return pathlib.Path(list(spec.submodule_search_locations)[0])


def modules(root: pathlib.Path) -> Dict[str, pathlib.Path]:
    """Module name -> file, for every .py of the package and its subpackages."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [PACKAGE, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: pathlib.Path, known: Set[str]) -> Set[str]:
    """The leasequeue modules that the module `name` (at `path`) imports, by any import statement in it."""
    is_package = path.name == "__init__.py"
    edges: Set[str] = set()

    def add(target: str) -> None:
        if target == PACKAGE or target.startswith(PACKAGE + "."):
            # The deepest module of the dotted name that exists (a name may be a class of a module).
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target != name:
                edges.add(target)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # `from . import x` in leasequeue/a.py is leasequeue; in leasequeue/__init__.py too.
                base_parts = name.split(".") if is_package else name.split(".")[:-1]
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                # `from leasequeue import _wire` imports the module leasequeue._wire; `from leasequeue._lease import _Held` the module _lease.
                submodule = f"{base}.{alias.name}"
                add(submodule if submodule in known else base)
    return edges


def graph() -> Dict[str, Set[str]]:
    found = modules(package_dir())
    known = set(found)
    return {name: imports_of(name, path, known) for name, path in found.items()}


def find_cycle(edges: Dict[str, Set[str]]) -> Optional[List[str]]:
    """A cycle as [a, b, ..., a], or None."""
    state: Dict[str, int] = {}  # 1: on the current path, 2: done
    path: List[str] = []

    def visit(node: str) -> Optional[List[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


class ImportGraphTest(unittest.TestCase):
    def test_the_finder_sees_imports_of_every_form(self) -> None:
        edges = graph()
        # A top-level `from leasequeue._x import y`, and `from leasequeue import _x`.
        self.assertIn("leasequeue._lease", edges["leasequeue.worker"])
        self.assertIn("leasequeue._wire", edges["leasequeue.worker"])
        self.assertIn("leasequeue.worker", edges["leasequeue"])

    def test_the_resolver_on_every_form(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp) / "m.py"
            path.write_text(
                "from typing import TYPE_CHECKING\n"
                "import leasequeue._a\n"
                "from leasequeue import _b\n"
                "from . import _c\n"
                "from ._d import thing\n"
                "from leasequeue._e import Thing\n"
                "if TYPE_CHECKING:\n"
                "    from leasequeue.worker import Worker\n"
                "def f():\n"
                "    from leasequeue import _g\n"
                "import os\n"
            )
            known = {"leasequeue", "leasequeue.m", "leasequeue.worker", *(f"leasequeue._{c}" for c in "abcdeg")}
            self.assertEqual(
                imports_of("leasequeue.m", path, known),
                {"leasequeue.worker", *(f"leasequeue._{c}" for c in "abcdeg")},
            )

    def test_find_cycle_names_the_cycle(self) -> None:
        self.assertEqual(find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}), ["a", "b", "c", "a"])
        self.assertIsNone(find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}))

    def test_no_import_cycle(self) -> None:
        cycle = find_cycle(graph())
        if cycle:
            self.fail(f"import cycle: {' -> '.join(cycle)}")

    def test_nothing_imports_the_worker_but_the_package(self) -> None:
        importers = sorted(name for name, targets in graph().items() if "leasequeue.worker" in targets)
        self.assertEqual(importers, ["leasequeue"], "the worker composes the components; they must not import it")


if __name__ == "__main__":
    unittest.main()
