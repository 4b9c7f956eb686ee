"""Who writes each mutable field: an AST scan of the package's attribute assignments.

A field is ``Class.attribute`` for every attribute a class of the package declares (in
``__slots__``, as a class-level annotation, or assigned on ``self`` in one of its
methods). A write is an assignment, augmented assignment or ``del`` whose target is an
attribute (``x.attr = ...``, ``x.attr += ...``), a subscript of one (``x.attr[k] = ...``)
or a ``setattr(x, "attr", ...)`` with a literal name. A write through ``self`` (or
``cls``) inside a class counts for that class and its bases; any other write counts for
every class that declares the attribute in a module the writing module reaches through
its imports (directly or not, TYPE_CHECKING imports included) or in itself: the scan has
no types, so a name two such classes declare is charged to both, which can add writers
but not hide one (code can only hold an object of a class its module reaches).

``writers()`` maps each field to the modules that write it; a field with more than one
writing module has more than one owner. ``cycles()`` gives the package's import cycles
(TYPE_CHECKING imports included: each sits on a real two-way link).
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kinesis_trio"


@dataclass
class _Class:
    name: str
    module: str
    bases: list[str]
    fields: set[str] = field(default_factory=set)


def _module_name(path: Path, package: Path) -> str:
    rel = path.relative_to(package.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        out: list[ast.expr] = []
        for t in node.targets:
            out.extend(t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])
        return out
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    return []


def _written_attribute(target: ast.expr) -> ast.Attribute | None:
    """The attribute a target writes: ``x.a`` itself, or ``x.a`` of ``x.a[k]``."""
    while isinstance(target, ast.Subscript):
        target = target.value
    return target if isinstance(target, ast.Attribute) else None


def _classes(trees: dict[str, ast.Module]) -> dict[str, list[_Class]]:
    """Every class of the package by name, with the fields it declares."""
    by_name: dict[str, list[_Class]] = defaultdict(list)
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases]
            cls = _Class(node.name, module, bases)
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    cls.fields.add(item.target.id)
                if isinstance(item, ast.Assign):
                    for t in item.targets:
                        if isinstance(t, ast.Name) and t.id == "__slots__":
                            value = item.value
                            if isinstance(value, (ast.Tuple, ast.List)):
                                cls.fields.update(
                                    e.value
                                    for e in value.elts
                                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                                )
            for sub in ast.walk(node):
                for target in _targets(sub):
                    attr = _written_attribute(target)
                    if (
                        attr is not None
                        and isinstance(attr.value, ast.Name)
                        and attr.value.id == "self"
                    ):
                        cls.fields.add(attr.attr)
            by_name[node.name].append(cls)
    return by_name


def _lineage(cls: _Class, by_name: dict[str, list[_Class]]) -> list[_Class]:
    """The class and its bases in the package (by name)."""
    out, todo = [], [cls]
    while todo:
        c = todo.pop()
        if c in out:
            continue
        out.append(c)
        for base in c.bases:
            todo.extend(by_name.get(base.split(".")[-1], []))
    return out


def _imports(module: str, tree: ast.Module, trees: dict[str, ast.Module]) -> set[str]:
    """The package modules ``module`` imports (TYPE_CHECKING imports included)."""
    out = {module}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    for base, names in _from_imports(module, tree, trees):
        if not module.startswith(base + "."):  # its own package is imported before it anyway
            out.add(base)
        out.update(f"{base}.{name}" for name in names)
    return out


@functools.lru_cache(maxsize=4)
def _trees(package: Path) -> dict[str, ast.Module]:
    return {
        _module_name(p, package): ast.parse(p.read_text(encoding="utf-8"), str(p))
        for p in sorted(package.rglob("*.py"))
        if "proto" not in p.parts
    }


def cycles(package: Path = PACKAGE) -> list[list[str]]:
    """The import cycles among the package's modules: each a strongly connected set of two
    or more modules (sorted)."""
    trees = _trees(package)
    graph = {
        m: sorted(i for i in _imports(m, t, trees) if i in trees and i != m)
        for m, t in trees.items()
    }
    return _loops(graph)


def floor_of(module: str, package: Path = PACKAGE) -> str:
    """The part of the house a module is on: its subpackage (``_core``, ``_aws``, ...),
    ``ground`` for the modules directly in the package (``_config``, ``_errors``, ...), or
    ``face`` for the package's ``__init__`` and ``__main__`` (they hand names on)."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "__main__":
        return "face"
    if len(parts) == 2 and not (package / parts[1]).is_dir():
        return "ground"
    return parts[1]


def floor_imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Which floors each floor's modules import (TYPE_CHECKING imports included; a floor's
    imports of itself left out)."""
    trees = _trees(package)
    out: dict[str, set[str]] = {}
    for m, t in trees.items():
        here = floor_of(m, package)
        found = out.setdefault(here, set())
        for i in _imports(m, t, trees):
            if i in trees and floor_of(i, package) != here:
                found.add(floor_of(i, package))
    return out


def _from_imports(
    module: str, tree: ast.Module, trees: dict[str, ast.Module]
) -> list[tuple[str, list[str]]]:
    """``(module imported from, names)`` of each ``from ... import`` in ``module`` (a
    package's ``__init__`` imports relative to the package itself)."""
    is_package = any(k.startswith(module + ".") for k in trees)
    package = module if is_package or "." not in module else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out.append((base, [a.name for a in node.names]))
    return out


def door_breaches(floor: str = "_core", package: Path = PACKAGE) -> dict[str, list[str]]:
    """What modules outside ``floor`` take from it other than through its front door (its
    ``__init__``'s ``__all__``): a module inside it, or a name the door does not list."""
    trees = _trees(package)
    door = f"{package.name}.{floor}"
    listed: set[str] = set()
    for node in trees[door].body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            listed = set(ast.literal_eval(node.value))
    out: dict[str, list[str]] = {}
    for m, t in trees.items():
        if m == door or m.startswith(door + "."):
            continue
        found = sorted(i for i in _imports(m, t, trees) if i in trees and i.startswith(door + "."))
        for base, names in _from_imports(m, t, trees):
            if base == door:
                found += sorted(f"{door}.{n}" for n in names if n not in listed)
        if found:
            out[m] = found
    return out


def floor_cycles(package: Path = PACKAGE) -> list[list[str]]:
    """Floors that import each other, through any of their modules (a loop the module scan
    does not see when no one module closes it)."""
    return _loops({k: sorted(v) for k, v in floor_imports(package).items()})


def _loops(graph: dict[str, list[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(m: str) -> None:  # Tarjan's algorithm
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for n in graph.get(m, []):
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in on_stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            group = []
            while True:
                n = stack.pop()
                on_stack.discard(n)
                group.append(n)
                if n == m:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    return sorted(out)


def writers(package: Path = PACKAGE) -> dict[str, set[str]]:
    """``"module.Class.attribute"`` -> the modules that write it."""
    return {k: set(v) for k, v in _writers(package).items()}


@functools.lru_cache(maxsize=4)
def _writers(package: Path) -> dict[str, frozenset[str]]:
    trees = _trees(package)
    by_name = _classes(trees)
    declaring: dict[str, list[_Class]] = defaultdict(list)
    for classes in by_name.values():
        for cls in classes:
            for name in cls.fields:
                declaring[name].append(cls)
    out: dict[str, set[str]] = defaultdict(set)

    def charge(classes: list[_Class], attr: str, module: str) -> None:
        for c in classes:
            if attr in c.fields:
                out[f"{c.module}.{c.name}.{attr}"].add(module)

    direct = {module: _imports(module, tree, trees) for module, tree in trees.items()}
    for module, tree in trees.items():
        seen, todo = set(), [module]
        while todo:
            m = todo.pop()
            if m in seen:
                continue
            seen.add(m)
            todo.extend(direct.get(m, ()))
        # which class each node sits in (for ``self`` writes)
        owner: dict[int, _Class] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                cls = next(c for c in by_name[node.name] if c.module == module)
                for sub in ast.walk(node):
                    owner.setdefault(id(sub), cls)
        for node in ast.walk(tree):
            found: list[tuple[ast.expr, str]] = []
            for target in _targets(node):
                written = _written_attribute(target)
                if written is not None:
                    found.append((written.value, written.attr))
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("setattr", "object.__setattr__")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                found.append((node.args[0], node.args[1].value))
            for value, attr in found:
                home = owner.get(id(node))
                if isinstance(value, ast.Name) and value.id in ("self", "cls") and home:
                    charge(_lineage(home, by_name), attr, module)
                else:
                    visible = [c for c in declaring.get(attr, []) if c.module in seen]
                    charge(visible, attr, module)
    return {k: frozenset(v) for k, v in out.items()}


def shared(package: Path = PACKAGE) -> dict[str, list[str]]:
    """The fields written from more than one module, with those modules."""
    return {f: sorted(m) for f, m in sorted(writers(package).items()) if len(m) > 1}


if __name__ == "__main__":
    for name, modules in shared().items():
        print(f"{name}: {', '.join(modules)}")
    for group in cycles():
        print("cycle:", " <-> ".join(group))
