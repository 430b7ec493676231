"""The native half of the package (Rust, python/src/lib.rs); use the functions in
``stampede`` instead, which build the command lines these take."""

from typing import Any, Callable, Optional

import pyarrow

__version__: str

def command(
    args: list[str], progress: Optional[Callable[[int, int], Any]] = None
) -> tuple[bool, int, list[str], list[str], Optional[str], bool]:
    """Runs ``stampede ARGS…`` in process, the GIL released: ``(ok, exit_code,
    texts, warnings, summary, unreadable)`` — the JSON documents (or, not ``ok``, the
    error message), the warnings, ``run``'s summary table and whether the error is a
    file the input names that is missing or cannot be read. ``progress(done, total)`` is
    called about every 100 ms; an exception from it or from a signal handler
    (KeyboardInterrupt) cancels the command and is raised once it has stopped."""

def read_table(path: str) -> pyarrow.Table:
    """A Parquet file as a ``pyarrow.Table``, decoded in Rust and handed over through
    the Arrow C data interface without a copy."""

def builtins() -> list[tuple[str, str]]:
    """The built-in scenarios: ``(name, description)`` in ``stampede list`` order."""
