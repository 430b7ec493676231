"""verify, optimize, rare, compare and fit: the CLI's JSON documents as Python objects."""

import json

import pytest

import stampede


def cli_json(cli, *args):
    return json.loads(cli(*args, "--json", check=False).stdout)


def test_verify_is_the_clis_document(cli, tmp_path):
    verified = stampede.verify("mg1", replicas=20, progress=False)
    printed = cli_json(cli, "verify", "mg1", "--replicas", "20", "--out", tmp_path)
    # The commit each was built at: equal under `cargo test --workspace`, which builds
    # both; `cargo test -p stampede-python` alone may find an older binary.
    assert {**verified, "commit": None} == {**printed, "commit": None}
    assert verified.ok and verified["verdict"] == "pass" and verified["counts"]["passed"] == 5
    failing = stampede.verify("mg1", replicas=20, set=["queue.service_mean_s=0.5"], progress=False)
    assert not failing.ok and failing.exit_code == 1 and failing["verdict"] == "fail"


def test_compare_of_two_kept_runs(cli, tmp_path):
    a = stampede.run("mmc", replicas=20, seed=1, out=tmp_path / "a", progress=False)
    b = stampede.run("mmc", replicas=20, seed=2, out=tmp_path / "b", progress=False)
    compared = stampede.compare(a, b)
    assert compared == cli_json(cli, "compare", a.path, b.path)
    assert compared.exit_code in (0, 1)
    with pytest.raises(ValueError, match="out="):
        stampede.compare(stampede.run("mmc", replicas=5, progress=False), b)


def test_fit_is_the_clis_document(cli, tmp_path):
    data = tmp_path / "latency.csv"
    data.write_text("latency_s\n" + "\n".join(str(0.010 + ((i * 37) % 90) / 1000) for i in range(400)) + "\n")
    fitted = stampede.fit(data, column="latency_s")
    assert fitted == cli_json(cli, "fit", data, "--column", "latency_s")
    assert fitted.ok


def test_optimize_answers_as_the_cli(cli, tmp_path):
    options = dict(minimize="wait_mean_s", require=["utilization_ratio <= 0.7"], budget_replicas=400, progress=False)
    answer = stampede.optimize("mmc", **options)
    printed = cli_json(cli, "optimize", "mmc", "--minimize", "wait_mean_s", "--require", "utilization_ratio <= 0.7",
                       "--budget-replicas", "400", "--out", tmp_path)
    assert answer == printed and answer.ok
    assert answer["chosen"]["params"] == {"queue.servers": 4}  # least wait; 3 and 4 are both under 0.7
    with pytest.raises(stampede.ScenarioError, match="--minimize"):
        stampede.optimize("mmc", minimize="no_such_metric", progress=False)


def test_rare_answers_as_the_cli_and_reads_a_scenarios_question(cli, tmp_path):
    effort = dict(trajectories=20, min_runs=2, max_runs=2)
    # Two runs of 20 trajectories is too little for 10%: the CLI's warnings arrive as
    # Python warnings.
    with pytest.warns(stampede.StampedeWarning, match="the budget of --max-runs 2 was spent"):
        answer = stampede.rare("graph-storm-odds", progress=False, **effort)
    printed = cli_json(cli, "rare", "graph-storm-odds", "--trajectories", "20", "--min-runs", "2", "--max-runs", "2",
                       "--out", tmp_path)
    assert answer == printed and answer.ok
    assert answer["per"] == "1d" and [p["label"] for p in answer["points"]] == [
        'case = "naive: 4 attempts"', 'case = "budgeted: 4 attempts, 10% budget"']
    for point in answer["points"]:
        assert point["ci_lo"] <= point["probability"] <= point["ci_hi"]
        assert point["per_period"]["windows"] == 1440.0
    # The question's words in Python: a float share, a flag's keyword; errors name the flag.
    mm1 = {"name": "mm1", "model": "mmc", "run": {"horizon_s": 1e5, "replicas": 1, "seed": 5},
           "queue": {"arrival_rate_per_s": 1.0, "service_rate_per_s": 2.0, "servers": 1}}
    kept = stampede.rare(mm1, event="in_system >= 8", until="in_system == 0", relative_error=0.2,
                         out=tmp_path / "kept", progress=False)
    assert (tmp_path / "kept" / "mm1-rare" / "estimates.parquet").exists()
    assert kept["target_relative_error"] == 0.2
    with pytest.raises(stampede.ScenarioError, match="--event"):
        stampede.rare(mm1, progress=False)
