"""Python values as TOML text: what ``set=``, ``grid=`` and a scenario given as a dict
become on their way to the scenario parser, which reads them exactly as it reads a
scenario file or a ``--set`` on the command line.

Tables are written inline (``{a = 1, b = {c = 2}}``) and arrays of tables as arrays
of inline tables: the same TOML document as ``[a]`` sections and ``[[verify]]``
blocks once parsed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def key(name: str) -> str:
    """A TOML key: bare when it can be, quoted otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"TOML keys are strings; {name!r} is a {type(name).__name__}")
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def value(v: Any) -> str:
    """One TOML value: booleans, integers, floats (inf and nan too), strings, lists
    and dicts (nested as deep as you like); numpy scalars through ``.item()``."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        # JSON's escapes are TOML's basic-string escapes.
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{key(k)} = {value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if hasattr(v, "item") and callable(v.item):  # numpy scalars
        return value(v.item())
    if v is None:
        raise TypeError("TOML has no null: leave the field out instead of setting it to None")
    raise TypeError(f"{v!r} ({type(v).__name__}) has no TOML form: use a bool, int, float, str, list or dict")


def document(table: Mapping[str, Any]) -> str:
    """A scenario dict as a TOML document, one top-level key a line."""
    if not isinstance(table, Mapping):
        raise TypeError(f"a scenario dict is a mapping; {type(table).__name__} is not")
    return "".join(f"{key(k)} = {value(v)}\n" for k, v in table.items() if v is not None)
