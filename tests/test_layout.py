"""The layout rule: a package reaches another only through its public names.

A *package* of gpurpo is the shallowest subpackage on a module's path that
holds modules of its own besides ``__init__.py``: ``gpurpo.tree`` (with
``tree/binning`` and ``tree/_numba`` inside it), ``gpurpo.dask``,
``gpurpo.linalg``, ... ``gpurpo.ensemble`` only gathers its subpackages, so
``gpurpo.ensemble.forest`` and ``gpurpo.ensemble.boosting`` are packages of
their own. A private module (``gpurpo.linalg._x``) or private name
(``from gpurpo.tree.grower import _x``) belongs to the package that holds it,
and only that package's modules may import it.

The private modules at the root of gpurpo (``gpurpo._validation``,
``gpurpo._class_targets``, ``gpurpo._input_features``, ...) belong to gpurpo
itself: they are internals shared by every package, so any module may import
them.

``gpurpo.dask``, which wraps the estimators of the other packages, also
reaches their objects only through public attributes: it reads, writes and
calls no private attribute that it does not define itself (Dask's ``_meta``
of its arrays aside), and its classes override no private method of another
package's base class (the overridable steps of those classes are public
methods, their documented extension API).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gpurpo"


def _holds_modules(folder: Path) -> bool:
    return any(p.suffix == ".py" and p.name != "__init__.py" for p in folder.iterdir())


def package_of(module: str) -> str:
    """The gpurpo package (module docstring) that the module or package ``module`` is in."""
    parts = module.split(".")
    for i in range(2, len(parts) + 1):
        folder = ROOT.joinpath(*parts[:i])
        if folder.is_dir() and _holds_modules(folder):
            return ".".join(parts[:i])
    if ROOT.joinpath(*parts).is_dir():
        return module
    return ".".join(parts[:-1])


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str, str | None]]:
    """(line, imported module, imported name or None) of every gpurpo import in ``tree``."""
    here = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found += [(node.lineno, target, alias.name) for alias in node.names]
    return [(line, target, name) for line, target, name in found
            if target == "gpurpo" or target.startswith("gpurpo.")]


def offences(source: str, module: str, is_package: bool = False) -> list[str]:
    """The imports of ``source`` (the code of ``module``) that break the layout rule."""
    importer = package_of(module)
    found = []
    for line, target, name in _imports(ast.parse(source), module, is_package):
        parts = target.split(".")
        private = next((i for i, part in enumerate(parts) if _is_private(part)), None)
        if private is not None:
            owner = package_of(".".join(parts[: private + 1]))
        elif name is not None and _is_private(name):
            owner = package_of(target)
        else:
            continue
        if owner not in ("gpurpo", importer):
            shown = target if name is None else f"{target}.{name}"
            found.append(f"{module}:{line} imports {shown}, private to {owner}")
    return found


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def test_packages_of_the_layout():
    assert package_of("gpurpo._validation") == "gpurpo"
    assert package_of("gpurpo.projections") == "gpurpo"
    assert package_of("gpurpo.tree") == "gpurpo.tree"
    assert package_of("gpurpo.tree.binning._sparse") == "gpurpo.tree"
    assert package_of("gpurpo.ensemble") == "gpurpo.ensemble"
    assert package_of("gpurpo.ensemble.forest.growth") == "gpurpo.ensemble.forest"
    assert package_of("gpurpo.dask._grower") == "gpurpo.dask"


@pytest.mark.parametrize(
    ("source", "module", "n_offences"),
    [
        # private modules and names of another package
        ("from gpurpo.ensemble.forest._base import BaseForest", "gpurpo.dask._forest", 1),
        ("import gpurpo.linalg._qr as qr", "gpurpo.dask._linalg", 1),
        ("from gpurpo.tree.grower import _Grower, _Nodes, draw_root_seeds",
         "gpurpo.dask._grower", 2),
        ("from gpurpo.linalg import _qr", "gpurpo.dask._linalg", 1),
        ("def f():\n    from gpurpo.tree.binning._sparse import x\n", "gpurpo.dask._grower", 1),
        ("from gpurpo.ensemble.forest._batches import tree_batches",
         "gpurpo.ensemble.boosting._base", 1),
        ("from gpurpo.tree._params import GrowthParams", "gpurpo", 1),
        # public names, the package's own privates, gpurpo's shared internals
        ("from gpurpo.ensemble.forest.base import BaseForest", "gpurpo.dask._forest", 0),
        ("from gpurpo.tree.grower import HostGrower", "gpurpo.dask._grower", 0),
        ("from gpurpo.ensemble.boosting import GradientBoostingRegressor as _Local",
         "gpurpo.dask._boosting", 0),
        ("from gpurpo.tree.binning._sparse import x", "gpurpo.tree.kernels", 0),
        ("from gpurpo.tree._params import GrowthParams", "gpurpo.tree.binning._mapper", 0),
        ("from gpurpo._validation import check_int", "gpurpo.dask._forest", 0),
        ("from gpurpo._class_targets import one_hot", "gpurpo.ensemble.forest.base", 0),
        ("from ._grower import PartitionGrower", "gpurpo.dask._partition", 0),
        ("from .._params import GrowthParams", "gpurpo.tree.binning._mapper", 0),
        ("from numpy import _core", "gpurpo.dask._forest", 0),
    ],
)
def test_rule_flags_private_imports_across_packages(source, module, n_offences):
    assert len(offences(source, module)) == n_offences


def test_no_package_imports_another_packages_private_modules_or_names():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module, is_package = _module_name(path)
        found += offences(path.read_text(encoding="utf-8"), module, is_package)
    assert not found, "private imports across packages:\n" + "\n".join(found)


# -- gpurpo.dask reaches other packages' objects through public attributes only --------

#: Dask's documented attribute of its arrays: the type of their chunks (``da.Array._meta``)
DASK_ARRAY_API = frozenset({"_meta"})
#: calls that read or write an attribute named by a string
_ATTRIBUTE_CALLS = frozenset({"getattr", "setattr", "hasattr", "delattr"})


def _own_private_names(trees: list[ast.AST]) -> set[str]:
    """The private names the modules ``trees`` define: functions, classes, methods,
    assigned names, attributes assigned on ``self`` / ``cls``, import aliases."""
    names = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[0])
    return {name for name in names if _is_private(name)}


def _attribute_uses(tree: ast.AST) -> list[tuple[int, ast.AST, str]]:
    """(line, object, attribute name) of every ``obj.name`` and ``getattr(obj, "name")``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            found.append((node.lineno, node.value, node.attr))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in _ATTRIBUTE_CALLS and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            found.append((node.lineno, node.args[0], node.args[1].value))
    return found


def private_attribute_offences(sources: dict[str, str]) -> list[str]:
    """The uses, in the modules ``sources`` (name: code) of one package, of private
    attributes that the package does not define itself.

    ``obj._name`` is allowed where ``_name`` is defined by the package (its own
    classes' methods and attributes, on ``self``, ``cls`` or an instance), and
    for the arrays' ``_meta`` of Dask's API; everything else is another
    package's private attribute (including one inherited by ``self``).
    """
    trees = {module: ast.parse(source) for module, source in sources.items()}
    own = _own_private_names(list(trees.values()))
    found = []
    for module, tree in trees.items():
        for line, obj, name in _attribute_uses(tree):
            if not _is_private(name) or name in own:
                continue
            is_self = isinstance(obj, ast.Name) and obj.id in ("self", "cls")
            if not is_self and name in DASK_ARRAY_API:
                continue
            found.append(f"{module}:{line} uses {ast.unparse(obj)}.{name}, a private "
                         "attribute of another package")
    return found


@pytest.mark.parametrize(
    ("source", "n_offences"),
    [
        # another package's private attributes and methods, read, written or called
        ("def f(local, rng):\n    local._rng = rng\n", 1),
        ("def f(template, y):\n    return template._encode_targets(y)\n", 1),
        ("def f(est):\n    return est.model._one_d\n", 1),
        ("def f(grower, ids):\n    return grower._node_stats(ids)\n", 1),
        ("def f(est):\n    return getattr(est, '_kind')\n", 1),
        ("def f(est, v):\n    setattr(est, '_model', v)\n", 1),
        # inherited from another package's class: private there
        ("class G(HostGrower):\n    def f(self, ids):\n        return self._ranges(ids)\n", 1),
        ("class G:\n    def f(self):\n        return self._meta\n", 1),
        # the package's own names, public names, Dask's documented _meta
        ("class G:\n    def _h(self):\n        return 1\n    def f(self):\n        return self._h()\n",
         0),
        ("class E:\n    _local_class = int\nfor _cls in (E,):\n    _cls._local_class\n", 0),
        ("class A:\n    def __init__(self):\n        self._level = 0\n"
         "def f(a):\n    return a._level\n", 0),
        ("def f(X, y):\n    return X._meta, getattr(y, '_meta', None)\n", 0),
        ("def f(local, p):\n    return local.validated_params(p), local.__dict__\n", 0),
        ("from gpurpo.ensemble import GradientBoostingRegressor as _Local\n"
         "def f(x):\n    return x._Local\n", 0),
    ],
)
def test_rule_flags_private_attributes_of_other_packages(source, n_offences):
    assert len(private_attribute_offences({"gpurpo.dask._m": source})) == n_offences


def test_dask_uses_only_public_attributes_of_other_packages():
    sources = {_module_name(path)[0]: path.read_text(encoding="utf-8")
               for path in sorted((PACKAGE / "dask").glob("*.py"))}
    found = private_attribute_offences(sources)
    assert not found, "private attributes of other packages:\n" + "\n".join(found)


def test_dask_classes_override_only_public_methods_of_other_packages():
    pytest.importorskip("distributed")
    import importlib
    import inspect

    found = []
    for path in sorted((PACKAGE / "dask").glob("*.py")):
        module = importlib.import_module(_module_name(path)[0])
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                continue
            for name in vars(cls):
                if not _is_private(name):
                    continue
                for base in cls.__mro__[1:]:
                    if not base.__module__.startswith("gpurpo.dask") and name in vars(base):
                        found.append(f"{cls.__module__}.{cls.__qualname__}.{name} overrides "
                                     f"{base.__module__}.{base.__qualname__}.{name}")
    assert not found, "overrides of other packages' private methods:\n" + "\n".join(found)
