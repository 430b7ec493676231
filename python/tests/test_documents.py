"""verify, optimize, compare and fit: the CLI's JSON documents as Python objects."""

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
