"""Shared by the Python package's tests: the CLI binary to compare with, and
`need(module)` — a module the test needs, skipped with what to install, or (in CI,
STAMPEDE_REQUIRE_PYTHON=1) a failure: CI never passes by skipping."""

import importlib
import os
import subprocess

import pytest


def need(module: str, install: str):
    if os.environ.get("STAMPEDE_REQUIRE_PYTHON") == "1":
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"needs {module}: {install}")


@pytest.fixture(scope="session")
def cli():
    """Runs the `stampede` binary (STAMPEDE_BIN) and returns the completed process."""
    binary = os.environ.get("STAMPEDE_BIN")
    if not binary or not os.path.exists(binary):
        if os.environ.get("STAMPEDE_REQUIRE_PYTHON") == "1":
            raise RuntimeError("STAMPEDE_BIN does not name the stampede binary (cargo build builds it)")
        pytest.skip("needs the stampede binary in STAMPEDE_BIN: cargo build, then STAMPEDE_BIN=target/debug/stampede")

    def run(*args, check=True):
        return subprocess.run([binary, *map(str, args)], capture_output=True, text=True, check=check)

    return run
