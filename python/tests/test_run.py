"""stampede.run against the CLI: the same tables, the same bytes, the same errors."""

import json
import os
import signal
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import stampede
from conftest import need


def test_mmc_tables_are_the_clis_value_for_value(cli, tmp_path):
    cli("run", "mmc", "--seed", "7", "--out", tmp_path / "cli", "--quiet")
    result = stampede.run("mmc", seed=7, progress=False)
    folder = tmp_path / "cli" / "mmc"
    files = sorted(folder.glob("*.parquet"))
    assert [f.stem for f in files] == sorted(result.tables) == ["histograms", "replicas", "summary"]
    for file in files:
        written = pq.read_table(file)
        table = result.tables[file.stem]
        assert table.schema.equals(written.schema, check_metadata=True), file.name
        assert table.equals(written), file.name
        assert table.num_rows == written.num_rows > 0
    assert result.summary.num_rows == 3 and result.replicas.num_rows == 300
    assert result.path is None  # not kept: no out=
    manifest = json.loads((folder / "manifest.json").read_text())
    assert result.manifest["scenario_toml"] == manifest["scenario_toml"]
    assert result.manifest["seed"] == manifest["seed"] == 7


def test_the_manifest_records_the_stampede_command_not_pythons(tmp_path):
    # Issue 75: a run from Python recorded ["python", "p2.py", ...] as how to run it
    # again; it records the stampede command line the call stands for.
    result = stampede.run("mmc", replicas=2, out=tmp_path, progress=False)
    line = json.loads((tmp_path / "mmc" / "manifest.json").read_text())["command_line"]
    assert line[0] == "stampede" and "run" in line and "mmc" in line, line
    assert not any("python" in part or part.endswith(".py") for part in line), line
    assert result.manifest["command_line"] == line


def test_series_and_trace_are_the_clis_too(cli, tmp_path):
    cli("run", "retry-storm", "--replicas", "4", "--trace", "1", "--out", tmp_path, "--quiet", "--no-report")
    result = stampede.run("retry-storm", replicas=4, trace=1, report=False, progress=False)
    assert result.timeseries is not None and result.trace is not None
    for name in ("summary", "replicas", "histograms", "timeseries", "trace"):
        written = pq.read_table(tmp_path / "retry-storm" / f"{name}.parquet")
        assert result.tables[name].equals(written), name
    assert set(result.trace.column("replica").to_pylist()) == {1}
    with pytest.raises(ValueError, match="report=False"):
        result.report_html()


def test_out_writes_the_clis_folder_byte_for_byte(cli, tmp_path):
    cli("run", "mmc", "--seed", "7", "--replicas", "30", "--out", tmp_path / "cli", "--quiet")
    result = stampede.run("mmc", seed=7, replicas=30, out=tmp_path / "py", progress=False)
    assert result.path == tmp_path / "py" / "mmc"
    names = sorted(p.name for p in (tmp_path / "cli" / "mmc").iterdir())
    assert names == sorted(p.name for p in result.path.iterdir())
    assert "report.html" in names and "manifest.json" in names
    for name in names:
        if name.endswith(".parquet"):
            assert (tmp_path / "cli" / "mmc" / name).read_bytes() == (result.path / name).read_bytes(), name
    assert "<html" in result.report_html()[:200].lower()


def test_scenario_as_text_and_as_dict_runs_the_same(tmp_path):
    text = stampede.show("mmc", set={"queue.servers": 3})
    assert 'name = "mmc"' in text
    by_name = stampede.run("mmc", set={"queue.servers": 3}, replicas=10, progress=False)
    by_text = stampede.run(text, replicas=10, progress=False)
    assert by_text.summary.equals(by_name.summary)
    as_dict = {
        "name": "mmc",
        "model": "mmc",
        "run": {"horizon_s": 1000.0, "warmup_s": 50.0, "replicas": 100, "seed": 1},
        "queue": {"arrival_rate_per_s": 160.0, "service_rate_per_s": 100.0, "servers": 2},
        "grid": {"queue.servers": [2, 3, 4]},
    }
    by_dict = stampede.run(as_dict, set={"queue.servers": 3}, replicas=10, progress=False)
    assert by_dict.summary.equals(by_name.summary)
    path = tmp_path / "mine.toml"
    path.write_text(text)
    assert stampede.run(path, replicas=10, progress=False).summary.equals(by_name.summary)


def test_grid_set_and_case_reach_the_scenario():
    result = stampede.run("mmc", replicas=5, grid={"queue.servers": [2, 4]}, set=["run.seed=3"], progress=False)
    assert result.summary.column("queue.servers").to_pylist() == [2, 4]
    assert result.document["seed"] == 3
    assert result.document["replicas"] == 5
    mg1 = stampede.run("mg1", replicas=5, case=["exponential"], progress=False)
    assert mg1.summary.num_rows == 1


def test_bad_input_raises_the_clis_message(cli, tmp_path):
    for bad in (["--set", "queue.servers=0"], ["--set", "queue.servrs=3"], ["--replicas", "0"]):
        printed = cli("run", "mmc", *bad, "--out", tmp_path, "--quiet", check=False)
        assert printed.returncode == 2
        expected = printed.stderr.strip().removeprefix("stampede: error: ")
        path, _, value = bad[1].partition("=")
        kwargs = {"replicas": 0} if bad[0] == "--replicas" else {"set": {path: int(value)}}
        with pytest.raises(stampede.ScenarioError) as raised:
            stampede.run("mmc", out=tmp_path, progress=False, **kwargs)
        assert raised.value.message == expected
        assert raised.value.exit_code == 2
        assert isinstance(raised.value, ValueError)
    assert list(tmp_path.iterdir()) == []  # nothing written
    with pytest.raises(stampede.ScenarioError, match='unknown scenario "no-such"') as raised:
        stampede.run("no-such", progress=False)
    assert raised.value.hint == "`stampede list` shows the built-in scenarios"
    with pytest.raises(TypeError, match="replicas= takes an int, not str"):
        stampede.run("mmc", replicas="many", progress=False)


def test_an_interrupted_run_raises_keyboardinterrupt_and_leaves_no_folder(tmp_path):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    # A process started in the background by a shell without job control inherits SIGINT
    # ignored, and Python then installs no handler: install Python's own for this test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        stampede.run("mmc", replicas=20_000, out=tmp_path, progress=False)
    stopped = time.monotonic() - started
    timer.cancel()
    signal.signal(signal.SIGINT, previous)
    assert stopped < 10, f"took {stopped:.1f} s to stop"
    left = sorted(p.name for p in tmp_path.iterdir())
    # No output folder, no staging folder: only the hidden checkpoint a resume reads.
    assert left == [".mmc.checkpoint"], left
    resumed = stampede.run("mmc", replicas=40, out=tmp_path, progress=False, force=True)
    assert resumed.summary.num_rows == 3


def test_progress_is_reported_and_warnings_are_warnings():
    seen = []
    stampede.run("mmc", replicas=150, progress=lambda done, total: seen.append((done, total)))
    assert seen, "the callback was called while the run went on"
    assert all(total == 450 for _, total in seen if total)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)

    def refuse(done, total):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        stampede.run("mmc", replicas=20_000, progress=refuse)
    with pytest.warns(stampede.StampedeWarning, match="--resume with --precision"):
        stampede.run("mmc", precision="20%", max_replicas=40, resume=True, progress=False)


def test_progress_true_draws_a_tqdm_bar(capsys):
    need("tqdm", "python3 -m pip install tqdm")
    stampede.run("mmc", replicas=200, progress=True)
    drawn = capsys.readouterr().err
    assert "stampede" in drawn and "/600" in drawn and "replica/s" in drawn, drawn[-300:]
    stampede.run("mmc", replicas=5)  # not a terminal, not a notebook: no bar by default
    assert capsys.readouterr().err == ""


def test_the_gil_is_released_while_replicas_run():
    ticks = 0
    done = threading.Event()

    def count():
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)

    counter = threading.Thread(target=count)
    counter.start()
    started = time.monotonic()
    stampede.run("mmc", replicas=60, threads=1, progress=False)
    elapsed = time.monotonic() - started
    done.set()
    counter.join()
    # A thread that needs the GIL a thousand times a second kept running throughout.
    assert elapsed > 0.5 and ticks > 100 * elapsed, (elapsed, ticks)


def test_python_keeps_running_while_replicas_run():
    """The GIL is released for the native run: a Python loop on the calling side keeps
    counting while a run goes on in another thread (held, it would count a handful).
    A correctness check, not a speed ratio: how much faster two threads are is measured
    by python/benches/threads.py, which a busy machine cannot turn red."""
    done = threading.Event()

    def work():
        try:
            stampede.run("mmc", replicas=40, threads=1, report=False, progress=False)
        finally:
            done.set()

    worker = threading.Thread(target=work)
    worker.start()
    ticks = 0
    while not done.is_set():
        ticks += 1
    worker.join()
    assert ticks > 10_000, f"Python ran only {ticks} loop turns while the run went on: the GIL was held"


def test_tables_go_to_pandas_and_duckdb():
    result = stampede.run("mmc", replicas=10, progress=False)
    frame = result.to_pandas()
    assert list(frame["queue.servers"]) == [2, 3, 4]
    assert result.to_pandas("replicas").shape[0] == 30
    with pytest.raises(KeyError, match="no timeseries table"):
        result.to_pandas("timeseries")
    duckdb = need("duckdb", "python3 -m pip install duckdb")
    summary = result.summary  # DuckDB reads the Arrow table in place
    rows = duckdb.sql('select "queue.servers", wait_mean_s_mean from summary order by 1').fetchall()
    assert [r[0] for r in rows] == [2, 3, 4]
    assert rows[0][1] == pytest.approx(frame["wait_mean_s_mean"][0])
    assert "wait_mean_s" in repr(result) and "wrote " not in repr(result)
