"""Sweeps over a Dask cluster: the shards of ``stampede run --shard K/N`` as Dask tasks,
merged by ``stampede merge`` into the folder one process writes, byte for byte.

Each task runs one shard in a worker (the native call releases the GIL, so a worker's
threads run shards side by side) and writes ``OUT/NAME/shards/shard=K/``; ``out`` must
therefore be a folder every worker and this process can read and write (a shared
file system on a real cluster; any folder with a ``LocalCluster``). When every shard is
done, this process merges them into ``merged/NAME/`` and opens it::

    >>> from dask.distributed import Client, LocalCluster         # doctest: +SKIP
    >>> client = Client(LocalCluster(n_workers=4))                  # doctest: +SKIP
    >>> result = stampede.dask.run("policy-grid", client, shards=16, out="/shared/sweep")  # doctest: +SKIP

Ray works the same way (see the Python chapter of the book): a ``ray.remote`` around
``stampede.run(..., shard=f"{k}/{n}", out=...)``, then ``stampede.merge``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Optional, Union

import stampede


def _shard(scenario: Any, index: int, count: int, out: str, options: "dict[str, Any]") -> "dict[str, Any]":
    """One shard, in a worker: its JSON line (the folder it wrote)."""
    return dict(stampede.run(scenario, shard=f"{index}/{count}", out=out, progress=False, **options))


def run(
    scenario: stampede.Scenario,
    client: Any,
    *,
    shards: int,
    out: Union[str, "os.PathLike[str]"],
    merged: Union[None, str, "os.PathLike[str]"] = None,
    progress: Optional[Callable[[int, int], Any]] = None,
    **options: Any,
) -> stampede.Result:
    """Runs ``scenario`` as ``shards`` Dask tasks on ``client`` (a
    ``dask.distributed.Client``) and returns the merged run, opened
    (``stampede.open``). Shards go to ``out``; the merge to ``merged`` (default
    ``OUT/merged``). ``progress(done, total)`` is called as shards finish. Other
    keyword arguments are ``stampede.run``'s (``replicas=``, ``seed=``, ``set=``,
    ``grid=``, ``threads=`` a shard, ``replica_rows=``…)."""
    from dask.distributed import as_completed

    if not isinstance(shards, int) or shards < 1:
        raise ValueError(f"shards={shards!r}: a positive number of shards")
    if isinstance(scenario, os.PathLike):
        scenario = os.fspath(scenario)
    root = os.fspath(out)
    futures = [client.submit(_shard, scenario, k, shards, root, options, pure=False) for k in range(shards)]
    folders = []
    for done, future in enumerate(as_completed(futures), start=1):
        folders.append(Path(future.result()["folder"]))
        if progress is not None:
            progress(done, shards)
    shard_root = folders[0].parent
    target = Path(os.fspath(merged)) if merged is not None else Path(root) / "merged"
    document = stampede.merge(shard_root, out=target, quiet=True)
    return stampede.open(document.get("output_dir") or target / shard_root.parent.name)
