"""Packages that import their modules on first use: one PEP 562 module ``__getattr__`` for all of them.

A package that re-exports names from its modules keeps a table ``{public name: defining module}``
and binds ``__getattr__ = lazy_exports(__name__, table, globals())``: a name is imported the first
time it is read and then cached in the package's namespace, so ``import builder.matrix`` (for
example) does not load the schema, validation and compatibility modules until one is used
(customizing module attribute access, PEP 562: https://peps.python.org/pep-0562/).
"""

import importlib
from collections.abc import Callable, Mapping, MutableMapping


def lazy_exports(
    package: str, exports: Mapping[str, str], namespace: MutableMapping[str, object]
) -> Callable[[str], object]:
    """The module ``__getattr__`` of ``package`` (its dotted name).

    ``exports``: public name -> the submodule (relative name, e.g. ``"load"``) that defines it;
    ``namespace``: the package's ``globals()``, where a name read once is kept. The returned
    function raises AttributeError (the message Python gives for a missing module attribute) for a
    name not in ``exports``, and ImportError/AttributeError from the submodule as they come.
    """

    def __getattr__(name: str) -> object:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__
