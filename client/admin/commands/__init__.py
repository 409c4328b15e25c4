"""The ``mqadmin`` commands, one module per family (upstream ``tools/command/<family>``).

Each module registers its commands with ``base.command`` when imported; ``load()`` imports
them all and returns ``base.REGISTRY`` (name -> ``Command``). The families listed in
``FAMILIES`` come first, in that order, and any other module of this package after them
(alphabetically), so a new family is one new file. ``base`` and ``formatting`` hold no
commands.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import REGISTRY, Command

__all__ = ["FAMILIES", "load"]

# The order ``mqadmin`` lists its commands in.
FAMILIES = ("topic", "broker", "consumer", "message", "namesrv", "acl")
_NOT_FAMILIES = frozenset({"base", "formatting"})


def load() -> dict[str, Command]:
    """Every command, by name (aliases included), in listing order: family by family, and
    in each family in the order its module defines them."""
    found = sorted(m.name for m in pkgutil.iter_modules(__path__)
                   if m.name not in _NOT_FAMILIES and not m.name.startswith("_"))
    families = [*FAMILIES, *(n for n in found if n not in FAMILIES)]
    for name in families:
        importlib.import_module(f"{__name__}.{name}")
    rank = {f"{__name__}.{name}": i for i, name in enumerate(families)}
    return dict(sorted(REGISTRY.items(), key=lambda item: rank[item[1].run.__module__]))
