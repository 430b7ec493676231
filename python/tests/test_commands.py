"""map, calibrate, import_traces, plan, merge, capacity and report: every command the
notebook workflow needs, each answering as the CLI does."""

import json
from pathlib import Path

import pytest

import stampede

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "src" / "examples"
MM1 = {"name": "mm1", "model": "mmc", "run": {"horizon_s": 1e5, "replicas": 1, "seed": 5},
       "queue": {"arrival_rate_per_s": 1.0, "service_rate_per_s": 2.0, "servers": 1}}


def cli_json(cli, *args):
    return json.loads(cli(*args, "--json", check=False).stdout)


def test_map_finds_the_stability_limit_as_the_cli_does(cli, tmp_path):
    queue = stampede.show("mmc").split("[grid]")[0]
    (tmp_path / "queue.toml").write_text(queue)
    flags = dict(x="queue.arrival_rate_per_s=50..390", y="queue.servers=1..2:int", metric="wait_mean_s",
                 level=0.02, replicas=4, set={"run.horizon_s": 100, "run.warmup_s": 10})
    drawn = stampede.map(queue, progress=False, **flags)
    printed = cli_json(cli, "map", tmp_path / "queue.toml", "--x", flags["x"], "--y", flags["y"], "--metric",
                       "wait_mean_s", "--level", "0.02", "--replicas", "4", "--set", "run.horizon_s=100", "--set",
                       "run.warmup_s=10", "--out", tmp_path / "out")
    assert drawn == printed
    with pytest.raises(stampede.ScenarioError, match="queue.nothing"):
        stampede.map(queue, x="queue.nothing=1..2", y=flags["y"], metric="wait_mean_s", level=0.02, progress=False)


def test_calibrate_reports_fidelity_and_writes_only_where_asked(cli, tmp_path):
    maps = ['api.read.offered_rps=api:http_requests:rate20s{handler="/read"}',
            'api.read.goodput_rps=api:http_responses_ok:rate20s{handler="/read"}',
            'api.busy=job:busy_workers:avg20s{job="api"}']
    model, observed = EXAMPLES / "calibrate-model.toml", EXAMPLES / "calibrate-production.json"
    checked = stampede.calibrate(model, observed, map=maps, check=True, replicas=4, progress=False)
    args = ["calibrate", model, "--observed", observed, "--check", "--replicas", "4", "--page", tmp_path / "p.html"]
    for item in maps:
        args += ["--map", item]
    printed = cli_json(cli, *args)
    assert checked["page"] is None and checked["calibrated_toml"] is None
    assert {**checked, "page": None} == {**printed, "page": None}


def test_import_gives_the_scenario_the_cli_writes_and_it_runs(cli, tmp_path):
    traces = EXAMPLES / "shop.otlp.json"
    imported = stampede.import_traces(traces, out=tmp_path / "py" / "shop.toml")
    cli("import", traces, "--out", tmp_path / "cli" / "shop.toml")
    assert imported == (tmp_path / "cli" / "shop.toml").read_text()
    assert imported.path == tmp_path / "py" / "shop.toml" and imported.path.read_text() == imported
    assert "services" in imported.to_dict()
    # Its samples sit beside it (shop.data/): the path runs as any scenario.
    assert stampede.run(imported.path, replicas=2, progress=False).summary.num_rows >= 1
    with pytest.raises(stampede.StampedeError):
        stampede.import_traces(tmp_path / "missing.json", out=tmp_path / "missing.toml")


def test_plan_capacity_and_report_are_the_clis(cli, tmp_path):
    planned = stampede.plan("mg1", precision="10%", shards=2, pilot=4)
    printed = cli_json(cli, "plan", "mg1", "--precision", "10%", "--shards", "2", "--pilot", "4")
    measured = {"compute_s": None, "compute_s_per_shard": None}  # the pilot's wall time
    assert {**planned, **measured} == {**printed, **measured} and planned["replicas"] >= 4
    sized = stampede.capacity(target_turns_rps=100)
    assert sized == cli_json(cli, "capacity", "--target-turns-rps", "100")
    result = stampede.run("mg1", replicas=4, out=tmp_path, progress=False, report=False)
    page = stampede.report(result)
    assert page == result.path / "report.html" and page.stat().st_size > 1000


def test_rare_shards_merge_into_the_single_process_answer(tmp_path):
    question = dict(event="in_system >= 8", until="in_system == 0", runs=4, relative_error="50%", progress=False)
    whole = stampede.rare(MM1, **question)
    for k in ["0/2", "1/2"]:
        stampede.rare(MM1, shard=k, out=tmp_path, **question)
    merged = stampede.merge(tmp_path / "mm1-rare" / "shards", out=tmp_path / "merged", quiet=True)
    assert merged == whole


def test_open_reads_plain_partitioned_and_merged_folders_lazily(tmp_path):
    import pyarrow.compute as pc

    plain = stampede.run("mmc", replicas=6, out=tmp_path / "plain", progress=False, report=False)
    opened = stampede.open(plain.path)
    assert set(opened.tables) >= {"summary", "replicas", "histograms"}
    assert opened.summary.equals(plain.summary) and opened.replicas.equals(plain.replicas)
    # Partitioned rows: one folder of hive partitions, read as one table or filtered first.
    parted = stampede.run("mmc", replicas=6, out=tmp_path / "parted", progress=False, report=False,
                          partition_by="grid_point")
    again = stampede.open(parted.path)
    assert (parted.path / "replicas").is_dir() and again.replicas.num_rows == plain.replicas.num_rows
    one_point = again.dataset("replicas").to_table(filter=pc.field("grid_point") == 1)
    assert one_point.num_rows == 6
    # Shards: refused with the merge to run; merged, they open as the single run does.
    for k in ["0/2", "1/2"]:
        stampede.run("mmc", replicas=6, out=tmp_path / "sharded", progress=False, shard=k)
    with pytest.raises(ValueError, match="merge them first"):
        stampede.open(tmp_path / "sharded" / "mmc")
    stampede.merge(tmp_path / "sharded" / "mmc" / "shards", out=tmp_path / "merged", no_report=True)
    assert stampede.open(tmp_path / "merged" / "mmc").summary.equals(plain.summary)
    with pytest.raises(stampede.StampedeIOError, match="not a stampede output folder"):
        stampede.open(tmp_path)


def test_argument_errors_are_pythons_and_name_the_keyword():
    with pytest.raises(TypeError, match=r"replicas= takes an int, not str \('ten'\)"):
        stampede.run("mmc", replicas="ten", progress=False)
    with pytest.raises(ValueError, match="--replicas"):  # the range is the CLI's: a ScenarioError
        stampede.verify("mmc", replicas=0, progress=False)
    with pytest.raises(TypeError, match="seed= takes an int"):
        stampede.rare(MM1, event="in_system >= 3", seed=1.5, progress=False)


def test_a_missing_file_is_an_oserror_and_a_misspelt_name_a_scenario_error(tmp_path):
    # A path that is not there, a data file the scenario names that is not there, a
    # trace that is not there: StampedeIOError, an OSError. A name that is no
    # built-in: ScenarioError, a ValueError.
    with pytest.raises(stampede.StampedeIOError, match="nor an existing file") as missing:
        stampede.run(tmp_path / "nope.toml", progress=False)
    assert isinstance(missing.value, OSError) and missing.value.exit_code == 2
    scenario = tmp_path / "rates.toml"
    scenario.write_text(
        'name = "rates"\nmodel = "mmc"\n[run]\nhorizon_s = 10.0\nreplicas = 1\n'
        '[queue]\nservice_rate_per_s = 2.0\nservers = 1\n[load]\nrate_file = "rates.csv"\n'
    )
    with pytest.raises(stampede.StampedeIOError, match="rates.csv: cannot read it"):
        stampede.run(scenario, progress=False)
    with pytest.raises(stampede.StampedeIOError, match="no such file"):
        stampede.import_traces([tmp_path / "spans.json"], out=tmp_path / "imported.toml")
    with pytest.raises(stampede.ScenarioError, match="neither a built-in") as misspelt:
        stampede.run("mcc", progress=False)
    assert not isinstance(misspelt.value, OSError)
