"""stampede.dask: shards as Dask tasks on a LocalCluster, merged byte for byte into the
folder one process writes."""

import stampede
from conftest import need


def test_a_sweep_on_a_local_cluster_is_the_single_runs_bytes(tmp_path):
    need("distributed", "python3 -m pip install 'dask[distributed]'")
    import stampede.dask
    from dask.distributed import Client, LocalCluster

    options = dict(replicas=6, grid={"queue.servers": [2, 3]}, set={"run.horizon_s": 2000, "run.warmup_s": 100})
    single = stampede.run("mmc", out=tmp_path / "single", progress=False, report=False, **options)
    seen = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with Client(cluster) as client:
            merged = stampede.dask.run("mmc", client, shards=3, out=tmp_path / "sharded",
                                       progress=lambda done, total: seen.append((done, total)), **options)
    assert seen == [(1, 3), (2, 3), (3, 3)]
    for table in ["summary.parquet", "replicas.parquet", "histograms.parquet"]:
        assert (merged.path / table).read_bytes() == (single.path / table).read_bytes(), table
