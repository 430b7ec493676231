"""stampede from Python: run scenarios in a notebook, get Arrow tables back.

Every function runs the ``stampede`` command's own code in this process (the native
module ``stampede._stampede``), so a run gives the bytes the CLI writes, an error
carries the CLI's message, and options mean what the CLI's flags mean::

    >>> import stampede
    >>> result = stampede.run("mmc", replicas=20, seed=7, progress=False)
    >>> result.summary.num_rows                  # one row per grid point
    3
    >>> df = result.to_pandas()                  # the summary as a DataFrame
    >>> print(result)                            # doctest: +SKIP
    ... the summary table `stampede run` prints ...

The GIL is released while replicas run (on every core unless ``threads=``), and
Ctrl-C — or a notebook's interrupt — stops a run, raising ``KeyboardInterrupt``;
its output folder never appears.
"""

from __future__ import annotations

import builtins
import json
import os
import shutil
import tempfile
import warnings as _warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Callable, Optional, Union

from . import _stampede, _toml

__version__: str = _stampede.__version__

__all__ = [
    "list",
    "show",
    "open",
    "run",
    "verify",
    "optimize",
    "rare",
    "map",
    "calibrate",
    "import_traces",
    "plan",
    "merge",
    "capacity",
    "report",
    "compare",
    "fit",
    "Result",
    "Document",
    "MapResult",
    "Calibration",
    "Capacity",
    "ImportedScenario",
    "StampedeError",
    "ScenarioError",
    "StampedeIOError",
    "StampedeWarning",
]

Scenario = Union[str, "os.PathLike[str]", Mapping[str, Any]]
# What the arguments take: `set=`/`grid=` a dict of path → value or "PATH=VALUE"
# strings; a flag given once or repeated; an output root; the progress bar's setting.
Fields = Union[None, Mapping[str, Any], Iterable[str]]
Repeated = Union[None, str, Iterable[str]]
Folder = Union[None, str, "os.PathLike[str]"]
ProgressOption = Union[None, bool, Callable[[int, int], Any]]


class StampedeError(Exception):
    """A command failed. ``message`` is what ``stampede`` prints after
    ``stampede: error:`` (with its ``hint:`` line when it has one) and ``exit_code``
    the code it exits with: 2 for bad input, 3 for I/O or an internal error."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    @property
    def hint(self) -> Optional[str]:
        """The message's hint (what to do about it), if it has one."""
        _, found, hint = self.message.partition("\n  hint: ")
        return hint if found else None


class ScenarioError(StampedeError, ValueError):
    """Bad input (the CLI's exit 2): the message names the field, the value and what
    is allowed; nothing was written."""


class StampedeIOError(StampedeError, OSError):
    """A file could not be read or written: the CLI's exit 3, or its exit 2 for a
    scenario, data or trace file the input names that is missing or unreadable."""

    def __init__(self, message: str, exit_code: int) -> None:
        StampedeError.__init__(self, message, exit_code)

    def __str__(self) -> str:
        return self.message


class StampedeWarning(UserWarning):
    """What ``stampede`` prints as ``stampede: warning:``: valid input that would likely mislead."""


class Document(dict):
    """A command's JSON document (what ``--json`` prints) as a dict, with the
    command's ``exit_code``: 1 when a claim failed (verify), something changed
    (compare) or nothing was feasible (optimize) — an answer, not an error."""

    exit_code: int = 0

    @property
    def ok(self) -> bool:
        """Whether the command would have exited 0."""
        return self.exit_code == 0


# --------------------------------------------------------------------- the calls


class _Progress:
    """The progress callback: a tqdm bar (a widget in notebooks, a line in terminals)
    once the command has work to show, or the caller's own ``callable(done, total)``.
    By default (``progress=None``) the bar is drawn in a notebook or on a terminal, not
    into a script's log."""

    def __init__(self, progress: ProgressOption) -> None:
        self.custom = progress if callable(progress) else None
        self.wanted = progress is True or (progress is None and _interactive() and _has_tqdm())
        self.bar = None

    def __call__(self, done: int, total: int) -> None:
        if self.custom is not None:
            self.custom(done, total)
            return
        if not self.wanted or total == 0:
            return
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, unit="replica", desc="stampede", leave=False)
        if self.bar.total != total or done < self.bar.n:
            self.bar.reset(total=total)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _interactive() -> bool:
    """A notebook, or a terminal someone watches: where a bar is wanted by default (a
    script's log would fill with its redraws)."""
    import sys

    # A Jupyter kernel's shell has a kernel; ipykernel merely imported (by a test
    # harness that starts kernels, say) is not a notebook.
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    in_kernel = getattr(shell, "kernel", None) is not None
    return in_kernel or (hasattr(sys.stderr, "isatty") and sys.stderr.isatty())


def _has_tqdm() -> bool:
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


def _call(args: "list[str]", progress: ProgressOption = False):
    """Runs ``stampede ARGS…`` in process: (documents, summary table, exit code)."""
    if progress is True and not _has_tqdm():
        raise ImportError("progress=True draws a tqdm bar: pip install tqdm (or pass a callable(done, total))")
    bar = _Progress(progress)
    try:
        # No callback when nothing is drawn: the waiting thread then only checks signals.
        wanted = bar.custom is not None or bar.wanted
        ok, exit_code, texts, warnings, summary, unreadable = _stampede.command(args, bar if wanted else None)
    finally:
        bar.close()
    for warning in warnings:
        _warnings.warn(warning, StampedeWarning, stacklevel=3)
    if not ok:
        error = ScenarioError if exit_code == 2 and not unreadable else StampedeIOError
        raise error(texts[0], exit_code)
    return [json.loads(text) for text in texts], summary, exit_code


def _scenario(scenario: Scenario) -> str:
    """The command line's scenario argument: a name or path as it is; a dict or TOML
    text as the TOML text itself (read against the working folder)."""
    if isinstance(scenario, Mapping):
        return _toml.document(scenario)
    if isinstance(scenario, os.PathLike):
        return os.fspath(scenario)
    if isinstance(scenario, str):
        return scenario
    raise TypeError(
        f"scenario: a built-in name, a path, TOML text or a dict; {type(scenario).__name__} is none of these"
    )


def _pairs(name: str, given: Fields) -> "list[tuple[str, Any]]":
    if given is None:
        return []
    if isinstance(given, Mapping):
        return [(str(path), value) for path, value in given.items()]
    if isinstance(given, str):
        given = [given]
    pairs = []
    for item in given:
        if not isinstance(item, str):
            raise TypeError(f"{name}: a dict of path → value, or 'PATH=VALUE' strings; got {item!r}")
        pairs.append((item, None))
    return pairs


def _scenario_args(
    set: Fields,
    grid: Fields,
    case: Repeated,
    replicas: Optional[int],
    seed: Optional[int],
) -> "list[str]":
    """``--set``, ``--grid``, ``--case``, ``--replicas`` and ``--seed`` from Python values."""
    args: "list[str]" = []
    for path, value in _pairs("set", set):
        args += ["--set", path if value is None else f"{path}={_toml.value(value)}"]
    for path, values in _pairs("grid", grid):
        if values is not None and not isinstance(values, str):
            values = _toml.value([*values])
        args += ["--grid", path if values is None else f"{path}={values}"]
    for label in [case] if isinstance(case, str) else (case or []):
        args += ["--case", label]
    if replicas is not None:
        args += ["--replicas", str(_whole("replicas", replicas))]
    if seed is not None:
        args += ["--seed", str(_whole("seed", seed))]
    return args


def _whole(keyword: str, value: Any) -> int:
    """A whole-number keyword's type checked in Python's words: a TypeError naming the
    keyword for a non-integer (``replicas="ten"``). Its range is the CLI's to check
    (a ``ScenarioError``, a ``ValueError``, with the CLI's message)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{keyword}= takes an int, not {type(value).__name__} ({value!r})")
    return value


def _options(**options: Any) -> "list[str]":
    """Keyword arguments as flags: ``max_time=60`` → ``--max-time 60``, ``True`` → the
    bare flag, ``False``/``None`` → left out, a list → the flag repeated."""
    args: "list[str]" = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, (builtins.list, tuple)):  # `list` is stampede.list here
            for item in value:
                args += [flag, str(item)]
        else:
            args += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return args


# --------------------------------------------------------------------- the API

def list() -> "list[dict[str, str]]":  # noqa: A001 - mirrors `stampede list`
    """The built-in scenarios, as ``stampede list`` prints them: ``name`` and ``description``.

    >>> import stampede
    >>> [s["name"] for s in stampede.list()][:2]
    ['baltor', 'retry-storm']
    """
    return [{"name": name, "description": description} for name, description in _stampede.builtins()]


def show(
    scenario: Scenario,
    *,
    set: Fields = None,
    grid: Fields = None,
    case: Repeated = None,
    replicas: Optional[int] = None,
    seed: Optional[int] = None,
) -> str:
    """The scenario resolved, as the complete TOML file ``stampede show`` prints
    (``run`` on it gives the same results).

    >>> import stampede
    >>> text = stampede.show("mmc", set={"queue.servers": 3})
    >>> print(text.splitlines()[0])
    name = "mmc"
    """
    documents, _, _ = _call(["show", *_scenario_args(set, grid, case, replicas, seed), "--", _scenario(scenario)])
    return documents[0]


class Result:
    """A finished run: its tables as ``pyarrow.Table``, its manifest, its report.

    ``summary`` (a row per grid point: every metric's mean, interval and more),
    ``replicas`` (a row per replica), ``histograms`` (HDR latency histograms),
    ``timeseries`` (series over simulated time; ``None`` for models without) and
    ``trace`` (with ``trace=R``) are the tables the CLI writes, column for column
    and value for value; ``tables`` has every one by file name. ``document`` is
    ``stampede run --json``'s document, ``manifest`` the folder's manifest.json,
    ``path`` the folder (``None`` when the run was not kept: no ``out=``).
    ``print(result)`` shows the summary table the terminal shows.
    """

    def __init__(
        self, folder: Path, document: dict, summary_text: Optional[str], kept: bool, lazy: bool = False
    ) -> None:
        self.document: dict = document
        self.manifest: dict = json.loads((folder / "manifest.json").read_text())
        self._folder = folder
        # A table is a file (summary.parquet) or, written with partition_by, a folder
        # of hive partitions (replicas/grid_point=K/part-0.parquet).
        names = sorted({file.stem for file in folder.glob("*.parquet")}
                       | {d.name for d in folder.iterdir() if d.is_dir() and any(d.glob("*=*/*.parquet"))})
        self.tables: "Mapping[str, Any]" = _Tables(self, names) if lazy else {name: self._read(name) for name in names}
        report = folder / "report.html"
        self._report_html = report.read_text() if report.exists() else None
        self._summary_text = summary_text or ""
        self.path: Optional[Path] = folder if kept else None

    def _read(self, name: str):
        file = self._folder / f"{name}.parquet"
        return _stampede.read_table(str(file)) if file.exists() else self.dataset(name).to_table()

    def dataset(self, name: str = "replicas"):
        """A table as a ``pyarrow.dataset.Dataset``, read lazily: filter and project
        before anything loads (``r.dataset().to_table(filter=pc.field("grid_point") == 3)``).
        Partitioned tables (``partition_by="grid_point"``) are read as their hive
        partitions."""
        import pyarrow.dataset as ds

        file, folder = self._folder / f"{name}.parquet", self._folder / name
        if file.exists():
            return ds.dataset(str(file), format="parquet")
        if folder.is_dir():
            return ds.dataset(str(folder), format="parquet", partitioning="hive")
        raise KeyError(f"no {name} table in {self._folder}; it has {', '.join(self.tables)}")

    summary = property(lambda self: self.tables.get("summary"), doc="One row per grid point (summary.parquet).")
    replicas = property(lambda self: self.tables.get("replicas"), doc="One row per replica (replicas.parquet).")
    histograms = property(lambda self: self.tables.get("histograms"), doc="HDR latency histograms (histograms.parquet).")
    timeseries = property(lambda self: self.tables.get("timeseries"), doc="Series over simulated time, or None.")
    trace = property(lambda self: self.tables.get("trace"), doc="Every call of the traced replica (trace=R), or None.")

    @property
    def scenario(self) -> str:
        """The scenario as run, as TOML (the manifest's ``scenario_toml``)."""
        return self.manifest["scenario_toml"]

    def to_pandas(self, table: str = "summary"):
        """A table as a pandas DataFrame (``summary`` unless named)."""
        if self.tables.get(table) is None:
            raise KeyError(f"no {table} table in this run; it has {', '.join(self.tables)}")
        return self.tables[table].to_pandas()

    def report_html(self) -> str:
        """The self-contained HTML report (report.html) as text."""
        if self._report_html is None:
            raise ValueError("this run wrote no report (report=False)")
        return self._report_html

    def _repr_html_(self) -> Optional[str]:
        return None  # a notebook shows __repr__: the terminal's table, in monospace

    def __repr__(self) -> str:
        lines = self._summary_text.rstrip("\n").split("\n")
        if self.path is None:
            # The temporary folder it names is gone.
            lines = [line for line in lines if not line.startswith("wrote ")]
        return "\n".join(lines) or f"<stampede.Result {self.document.get('scenario')}>"


class _Tables(Mapping):
    """A folder's tables by name, each read on first use (``stampede.open``)."""

    def __init__(self, result: Result, names: "list[str]") -> None:
        self._result, self._names, self._read = result, names, {}

    def __getitem__(self, name: str):
        if name not in self._names:
            raise KeyError(name)
        if name not in self._read:
            self._read[name] = self._result._read(name)
        return self._read[name]

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def open(path: Union[str, "os.PathLike[str]"]) -> Result:  # noqa: A001 - stampede's folders, not files
    """An output folder of ``run``, ``verify`` or ``merge`` — plain or written with
    ``partition_by`` — as a ``Result``, without running anything. Tables are read
    when first used, and ``result.dataset(name)`` reads one lazily, so a sweep of a
    million replicas opens at once and filters before it loads. A folder of shards
    is refused with the merge to run first.

    >>> import stampede, tempfile
    >>> kept = stampede.run("mg1", replicas=4, out=tempfile.mkdtemp(), progress=False)
    >>> again = stampede.open(kept.path)
    >>> again.summary.equals(kept.summary)
    True
    """
    folder = Path(os.fspath(path))
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        shards = folder / "shards" if (folder / "shards").is_dir() else folder
        if any(shards.glob("shard=*/manifest.json")):
            raise ValueError(
                f"{folder} holds shards, not a run: merge them first, "
                f"stampede.merge({os.fspath(shards)!r}, out=…), and open the merged folder"
            )
        raise StampedeIOError(f"{folder}: no manifest.json here: not a stampede output folder", 3)
    recorded = json.loads(manifest.read_text())
    kind = recorded.get("kind", "run")
    if kind not in ("run", "verify"):
        raise ValueError(f"{folder} is a `{kind}` folder; stampede.open reads run, verify and merge folders")
    document = {"scenario": recorded.get("scenario"), "output_dir": os.fspath(folder)}
    return Result(folder, document, None, kept=True, lazy=True)


def run(
    scenario: Scenario = "baltor",
    *,
    replicas: Optional[int] = None,
    seed: Optional[int] = None,
    set: Fields = None,
    grid: Fields = None,
    case: Repeated = None,
    threads: Optional[int] = None,
    out: Folder = None,
    force: bool = False,
    resume: bool = False,
    trace: Optional[int] = None,
    metric: Repeated = None,
    precision: Union[None, str, float, Iterable[Union[str, float]]] = None,
    max_replicas: Optional[int] = None,
    warmup: Union[None, float, str] = None,
    replica_rows: Optional[str] = None,
    report: bool = True,
    partition_by: Optional[str] = None,
    shard: Optional[str] = None,
    progress: ProgressOption = None,
) -> Result:
    """Runs a scenario's grid × replicas, as ``stampede run`` does.
    ``partition_by="grid_point"`` writes the replica rows and series as hive
    partitions (``stampede.open`` and ``Result.dataset`` read them); ``shard="K/N"``
    (with ``out=``) runs one shard for ``stampede.merge`` and returns its JSON line
    (the folder it wrote) instead of a result.

    ``scenario`` is a built-in name (``stampede.list()``), a path to a .toml file,
    TOML text, or a dict of the same structure. ``set={"queue.servers": 3}`` and
    ``grid={"retry.budget_ratio": [0.05, 0.1, 0.2]}`` are ``--set``/``--grid``
    (values are Python values; strings ``"PATH=VALUE"`` work too). ``out="results"``
    also keeps the folder the CLI writes (``results/<name>/``); without it the run is
    written to a temporary folder, read, and removed. ``progress``: ``None`` shows a
    tqdm bar in a notebook or on a terminal, ``True`` always, ``False`` never; a
    callable gets ``(done, total)`` about every 100 ms instead.
    The other options are the CLI's flags of the same names.

    >>> import stampede
    >>> r = stampede.run("mmc", replicas=20, grid={"queue.servers": [2, 3]}, progress=False)
    >>> r.summary.column("queue.servers").to_pylist()
    [2, 3]
    """
    if isinstance(precision, (str, float, int)):
        precision = [precision]
    args = [
        *_scenario_args(set, grid, case, replicas, seed),
        *_options(
            threads=threads,
            force=force,
            resume=resume,
            trace=trace,
            metric=metric,
            precision=precision,
            max_replicas=max_replicas,
            warmup=warmup,
            replica_rows=replica_rows,
            no_report=not report,
            partition_by=partition_by,
            shard=shard,
        ),
    ]
    if shard is not None:
        # A shard is a folder for `merge`, not a run to read: its JSON line says where.
        if out is None:
            raise ValueError("shard=: give out= (the shards' root, which merge reads); a shard alone is not a result")
        return _writing("run", scenario, out, args, progress, _read_document)

    def read(documents, summary, _exit_code, kept):
        return Result(Path(documents[0]["output_dir"]), documents[0], summary, kept)

    return _writing("run", scenario, out, args, progress, read)


def _writing(command: str, scenario: Scenario, out, args: "list[str]", progress, read: Callable[..., Any]):
    """Runs a command that writes ``OUT/<name>/`` (run, verify, optimize) into ``out``,
    or into a temporary folder removed once ``read(documents, summary, exit_code,
    kept)`` has taken what it needs from it."""
    temporary = tempfile.mkdtemp(prefix="stampede-") if out is None else None
    root = temporary or os.fspath(out)
    try:
        line = [command, "--json", "--out", root, *args, "--", _scenario(scenario)]
        documents, summary, exit_code = _call(line, progress)
        return read(documents, summary, exit_code, temporary is None)
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)


def _document(documents: "list[dict]", exit_code: int, kind: "type[Document]" = Document) -> Any:
    """The command's document as a ``kind`` (a :class:`Document` or a typed one)."""
    document = kind(documents[0])
    document.exit_code = exit_code
    return document


def _read_document(documents: "list[dict]", _summary: Optional[str], exit_code: int, _kept: bool) -> Document:
    """What verify and optimize return from their folder: the document alone."""
    return _document(documents, exit_code)


def verify(
    scenario: Scenario,
    *,
    replicas: Optional[int] = None,
    seed: Optional[int] = None,
    set: Fields = None,
    grid: Fields = None,
    case: Repeated = None,
    threads: Optional[int] = None,
    out: Folder = None,
    progress: ProgressOption = None,
    **options: Any,
) -> Document:
    """Runs the scenario and checks its ``[[verify]]`` claims, as ``stampede verify``
    does: the verify.json document (every claim with its statistic, interval and
    verdict); ``.ok`` is False when a claim failed. Other keyword arguments are the
    CLI's flags (``precision="2%"``, ``junit="claims.xml"``).

    >>> import stampede
    >>> v = stampede.verify("mg1", replicas=20, progress=False)
    >>> v.ok, v["verdict"], v["counts"]["passed"]
    (True, 'pass', 5)
    """
    args = [*_scenario_args(set, grid, case, replicas, seed), *_options(threads=threads, **options)]
    return _writing("verify", scenario, out, args, progress, _read_document)


def optimize(
    scenario: Scenario,
    *,
    minimize: Optional[str] = None,
    maximize: Optional[str] = None,
    require: Repeated = None,
    range: Repeated = None,
    replicas: Optional[int] = None,
    seed: Optional[int] = None,
    set: Fields = None,
    grid: Fields = None,
    case: Repeated = None,
    threads: Optional[int] = None,
    out: Folder = None,
    progress: ProgressOption = None,
    **options: Any,
) -> Document:
    """Finds the best configuration that meets constraints, as ``stampede optimize``
    does (``minimize="p99_s"``, ``require="goodput_ratio >= 0.99"``,
    ``range="retry.budget_ratio=0.01..0.5:log"``): its JSON document; ``.ok`` is
    False when nothing was feasible. Other keyword arguments are the CLI's flags
    (``budget_replicas=``, ``max_time=``, ``confidence=``…)."""
    args = [
        *_scenario_args(set, grid, case, replicas, seed),
        *_options(minimize=minimize, maximize=maximize, require=require, range=range, threads=threads, **options),
    ]
    return _writing("optimize", scenario, out, args, progress, _read_document)


def rare(
    scenario: Scenario,
    *,
    event: Optional[str] = None,
    within: Union[None, str, float] = None,
    per: Optional[str] = None,
    score: Optional[str] = None,
    until: Optional[str] = None,
    relative_error: Union[None, str, float] = None,
    seed: Optional[int] = None,
    set: Fields = None,
    grid: Fields = None,
    case: Repeated = None,
    threads: Optional[int] = None,
    out: Folder = None,
    progress: ProgressOption = None,
    **options: Any,
) -> Document:
    """The probability of a rare event by importance splitting, as ``stampede rare``
    does (``event="api.queue_depth >= 150"``, ``within="60s"``, ``per="1d"``): its
    rare.json document, one entry of ``["points"]`` per grid point with
    ``probability``, its 95% interval ``ci_lo``/``ci_hi``, ``relative_error``,
    ``runs``, ``levels``, ``events`` against ``plain_events_needed``, ``warnings``
    and, with ``per``, ``per_period``. The event may be judged on the finished run
    instead of the state: a metric (``event="recovered == false"``) or a window of
    latencies (``event="window(60, p99_all_s) > 2"``). A scenario's ``[rare]``
    section answers what is not given. Other keyword arguments are the CLI's flags (``levels="auto"``,
    ``trajectories=100``, ``max_runs=``, ``max_events="5G"``).

    >>> import stampede
    >>> mm1 = {"name": "mm1", "model": "mmc", "run": {"horizon_s": 1e5, "replicas": 1, "seed": 5},
    ...        "queue": {"arrival_rate_per_s": 1.0, "service_rate_per_s": 2.0, "servers": 1}}
    >>> answer = stampede.rare(mm1, event="in_system >= 12", until="in_system == 0",
    ...                        relative_error="15%", progress=False)
    >>> point = answer["points"][0]
    >>> point["ci_lo"] <= 1 / (2**12 - 1) <= point["ci_hi"]  # gambler's ruin, exactly
    True
    """
    if isinstance(relative_error, float):
        relative_error = repr(relative_error)
    args = [
        *_scenario_args(set, grid, case, None, seed),
        *_options(event=event, within=within, per=per, score=score, until=until, relative_error=relative_error,
                  threads=threads, **options),
    ]
    return _writing("rare", scenario, out, args, progress, _read_document)


class MapResult(Document):
    """What :func:`map` returns: the map.json document (a dict, as ``stampede map
    --json`` prints it) with typed views of it, and the figure.

    ``rows``: per grid point and value of y, the boundary x where the metric crosses
    the level (``boundary_x``, its ``band``, ``crossed``, ``monotone``);
    ``evaluations``: every point run (x, y, the metric's mean and interval);
    ``figure``: the first grid point's map as SVG text (``figures`` has one per grid
    point), which a notebook draws; ``path``: the output folder when ``out=`` kept it.
    """

    figures: "list[str]" = []
    path: Optional[Path] = None

    @property
    def rows(self) -> "list[dict[str, Any]]":
        return self["rows"]

    @property
    def evaluations(self) -> "list[dict[str, Any]]":
        return self["evaluations"]

    @property
    def figure(self) -> Optional[str]:
        return self.figures[0] if self.figures else None

    def boundary(self, grid_point: int = 0) -> "list[tuple[float, Optional[float]]]":
        """``(y, x)`` along the boundary of one grid point, ``x`` None where the
        metric never crossed the level in x's range."""
        return [
            (row["y"], row["boundary_x"] if row["crossed"] else None)
            for row in self.rows
            if row["grid_point"] == grid_point
        ]

    def _repr_svg_(self) -> Optional[str]:
        return self.figure


def map(  # noqa: A001 - mirrors `stampede map`
    scenario: Scenario,
    *,
    x: str,
    y: str,
    metric: Optional[str] = None,
    level: Optional[float] = None,
    replicas: Optional[int] = None,
    seed: Optional[int] = None,
    set: Fields = None,
    grid: Fields = None,
    case: Repeated = None,
    threads: Optional[int] = None,
    out: Folder = None,
    progress: ProgressOption = None,
    **options: Any,
) -> MapResult:
    """Where does the system tip? As ``stampede map``: for each value of ``y``
    (``"queue.servers=1..2:int"``) the ``x`` at which ``metric``'s mean crosses
    ``level``, bisected with intervals: a :class:`MapResult`. With ``out=``,
    ``OUT/NAME-map/`` keeps map.json, map.parquet, the figures and map.html. Other
    keyword arguments are the CLI's flags (``ys=``, ``tolerance=``).

    >>> import stampede
    >>> queue = stampede.show("mmc").split("[grid]")[0]
    >>> tipping = stampede.map(queue, x="queue.arrival_rate_per_s=50..390", y="queue.servers=1..2:int",
    ...                        metric="wait_mean_s", level=0.02, replicas=4, progress=False,
    ...                        set={"run.horizon_s": 100, "run.warmup_s": 10})
    >>> [(servers, round(rate, -1)) for servers, rate in tipping.boundary()]
    [(1.0, 70.0), (2.0, 170.0)]
    >>> tipping.figure.startswith("<svg")
    True
    """
    args = [
        *_scenario_args(set, grid, case, replicas, seed),
        *_options(x=x, y=y, metric=metric, level=level, threads=threads, **options),
    ]
    temporary = tempfile.mkdtemp(prefix="stampede-map-") if out is None else None
    root = Path(temporary or os.fspath(out))
    try:
        drawn: MapResult = _writing(
            "map", scenario, root, args, progress, lambda documents, _, code, _kept: _document(documents, code, MapResult)
        )
        # The folder this call wrote: the one whose map.json is this document.
        for written in sorted(root.glob("*-map/map.json")):
            if json.loads(written.read_text(encoding="utf-8")) == dict(drawn):
                figures = sorted(written.parent.glob("map-*.svg"), key=lambda f: int(f.stem.split("-")[-1]))
                drawn.figures = [figure.read_text(encoding="utf-8") for figure in figures]
                drawn.path = written.parent if temporary is None else None
                break
        return drawn
    finally:
        if temporary is not None:
            shutil.rmtree(temporary, ignore_errors=True)


class Calibration(Document):
    """What :func:`calibrate` returns: calibrate's JSON document (a dict, as
    ``stampede calibrate --json`` prints it) with typed views of it.

    ``fitted``: each unknown's path → ``(value, ci_lo, ci_hi)`` (empty for
    ``check=True``); ``fidelity``: per mapped metric its error against production
    (``mape``, ``bias``, ``correlation``, ``inside_band``…); ``passed``: no metric
    over ``max_error``; ``calibrated_text``: the calibrated scenario's TOML (after a
    fit), ``calibrated``: the same as a dict.
    """

    @property
    def fitted(self) -> "dict[str, tuple[float, float, float]]":
        dimensions = (self.get("fit") or {}).get("dimensions", [])
        return {d["path"]: (d["value"], d["ci_lo"], d["ci_hi"]) for d in dimensions}

    @property
    def fidelity(self) -> "list[dict[str, Any]]":
        return self["fidelity"]["metrics"]

    @property
    def passed(self) -> bool:
        return bool(self["passed"])

    @property
    def calibrated_text(self) -> Optional[str]:
        return self.get("calibrated_text")

    @property
    def calibrated(self) -> Optional["dict[str, Any]"]:
        """The calibrated scenario as a dict (``tomllib``, Python 3.11 or later)."""
        if self.calibrated_text is None:
            return None
        import tomllib

        return tomllib.loads(self.calibrated_text)


def calibrate(
    scenario: Scenario,
    observed: Union[str, "os.PathLike[str]"],
    *,
    map: Repeated = None,  # noqa: A002 - the CLI's --map
    fit: Repeated = None,
    check: bool = False,
    metric: Repeated = None,
    max_error: Union[None, str, float] = None,
    replicas: Optional[int] = None,
    seed: Optional[int] = None,
    set: Fields = None,
    grid: Fields = None,
    case: Repeated = None,
    threads: Optional[int] = None,
    page: Folder = None,
    write: Folder = None,
    progress: ProgressOption = None,
    **options: Any,
) -> Calibration:
    """Fits a scenario's unknowns to production's metrics, as ``stampede calibrate``
    (``fit="services.api.workers=4..32:int"``, ``map="api.busy=job:busy{job=\"api\"}"``),
    or reports its fidelity as it is (``check=True``): a :class:`Calibration`, each
    fitted value with its interval, the fidelity table and (after a fit) the
    calibrated scenario as text and dict. ``.ok`` is False when a metric is over
    ``max_error``. The page and the scenario file are written only where ``page=`` and
    ``write=`` say.

    >>> import stampede
    >>> fitted = stampede.calibrate("docs/src/examples/calibrate-model.toml",
    ...                             "docs/src/examples/calibrate-production.json",
    ...                             map=['api.busy=job:busy_workers:avg20s{job="api"}'],
    ...                             fit="services.api.workers=2..16:int", replicas=4, progress=False)
    >>> value, low, high = fitted.fitted["services.api.workers"]
    >>> low <= value <= high, fitted.calibrated["services"]["api"]["workers"] == value
    (True, True)
    >>> [metric["name"] for metric in fitted.fidelity]
    ['api.busy']
    """
    temporary = tempfile.mkdtemp(prefix="stampede-calibrate-")
    try:
        page_file = os.fspath(page) if page is not None else os.path.join(temporary, "calibrate.html")
        wanted_toml = write is not None
        toml_file = os.fspath(write) if wanted_toml else os.path.join(temporary, "calibrated.toml")
        args = [
            "calibrate", "--json", "--observed", os.fspath(observed), "--page", page_file,
            *(["--write", toml_file] if not check else []),
            *_scenario_args(set, grid, case, replicas, seed),
            *_options(map=map, fit=fit, check=check, metric=metric, max_error=max_error, threads=threads, **options),
            "--", _scenario(scenario),
        ]
        documents, _, exit_code = _call(args, progress)
        document = _document(documents, exit_code, Calibration)
        if os.path.exists(toml_file):
            with builtins.open(toml_file, encoding="utf-8") as text:
                document["calibrated_text"] = text.read()
        # The files written only where the caller asked; the rest was temporary.
        if not wanted_toml:
            document["calibrated_toml"] = None
        if page is None:
            document["page"] = None
        return document
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


class ImportedScenario(str):
    """The scenario ``stampede import`` wrote, as its TOML text (a ``str``), with
    ``path`` (where it was written) and ``to_dict()``."""

    path: Optional[Path] = None

    def to_dict(self) -> "dict[str, Any]":
        """The scenario as a dict (``tomllib``, Python 3.11 or later)."""
        import tomllib

        return tomllib.loads(self)


def import_traces(
    files: Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]],
    *,
    out: Union[str, "os.PathLike[str]"],
    format: Optional[str] = None,  # noqa: A002 - the CLI's --format
    name: Optional[str] = None,
    force: bool = False,
    **options: Any,
) -> ImportedScenario:
    """A service graph from traces, as ``stampede import`` (OTLP JSON or protobuf,
    Jaeger, Zipkin, Alibaba's CSV), written to ``out`` (``shop.toml``; the measured
    samples it points at go beside it, in ``shop.data/``): the scenario's TOML text,
    with ``.path``. It runs as any scenario: ``stampede.run(imported.path)``. Other
    keyword arguments are the CLI's flags (``bucket=``, ``sample_rate=``,
    ``window=``, ``skew=``, ``check=True``).

    >>> import os, tempfile, stampede
    >>> shop = stampede.import_traces("docs/src/examples/shop.otlp.json",
    ...                               out=os.path.join(tempfile.mkdtemp(), "shop.toml"))
    >>> shop.to_dict()["model"], sorted(shop.to_dict()["services"])
    ('graph', ['bank', 'cart', 'frontend', 'inventory', 'payment'])
    >>> stampede.run(shop.path, replicas=2, progress=False).summary.num_rows
    1
    """
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    paths = [os.fspath(file) for file in files]
    target = os.fspath(out)
    # The CLI's summary of what was read goes to a terminal; here the text is the answer.
    options.setdefault("quiet", True)
    args = ["import", "--out", target, *_options(format=format, name=name, force=force, **options), "--", *paths]
    _call(args)
    with builtins.open(target, encoding="utf-8") as text:
        imported = ImportedScenario(text.read())
    imported.path = Path(target)
    return imported


def plan(
    scenario: Scenario,
    *,
    precision: Repeated,
    shards: Optional[int] = None,
    seed: Optional[int] = None,
    set: Fields = None,
    grid: Fields = None,
    case: Repeated = None,
    threads: Optional[int] = None,
    progress: ProgressOption = None,
    **options: Any,
) -> Document:
    """How many replicas a sweep needs for ``precision`` (``"5%"`` or
    ``"p99_s=2%"``), from a pilot, as ``stampede plan --json``: the replicas per
    point and the shard commands. Other keyword arguments are the CLI's flags
    (``pilot=``, ``max_replicas=``, ``out=`` for the commands' output root).

    >>> import stampede
    >>> needed = stampede.plan("mg1", precision="5%", progress=False)
    >>> needed["asked"], needed["grid_points"], needed["pilot"]
    ('5%', 4, 20)
    """
    args = [
        "plan", "--json",
        *_scenario_args(set, grid, case, None, seed),
        *_options(precision=precision, shards=shards, threads=threads, **options),
        "--", _scenario(scenario),
    ]
    documents, _, exit_code = _call(args, progress)
    return _document(documents, exit_code)


def merge(
    shards: Union[str, "os.PathLike[str]", Iterable[Union[str, "os.PathLike[str]"]]],
    *,
    out: Union[str, "os.PathLike[str]"],
    **options: Any,
) -> Document:
    """Joins shard folders (``run --shard`` or ``rare --shard``; or the folder that
    holds them) into ``OUT/NAME/``, the folder one process writes, as ``stampede
    merge --json``: the merged run's document. Other keyword arguments are the CLI's
    flags (``verify=True``, ``precision=``, ``force=True``).

    >>> import os, tempfile, stampede
    >>> root = tempfile.mkdtemp()
    >>> for shard in ["0/2", "1/2"]:
    ...     _ = stampede.run("mg1", replicas=4, out=root, shard=shard, progress=False)
    >>> _ = stampede.merge(os.path.join(root, "mg1", "shards"), out=os.path.join(root, "merged"), no_report=True)
    >>> stampede.open(os.path.join(root, "merged", "mg1")).replicas.num_rows  # 4 grid points × 4 replicas
    16
    """
    if isinstance(shards, (str, os.PathLike)):
        shards = [shards]
    args = ["merge", "--json", "--out", os.fspath(out), *_options(**options), "--",
            *[os.fspath(shard) for shard in shards]]
    documents, _, exit_code = _call(args)
    return _document(documents, exit_code)


class Capacity(Document):
    """What :func:`capacity` returns: capacity's JSON document (a dict) with typed
    views: ``sustainable_turns_rps`` and what ``limited_by`` it, the ``gap`` to the
    target, and per ``tiers`` (tier and meter), ``classes`` (request class) and
    ``levers`` (what each change would give) the rows of its tables."""

    @property
    def sustainable_turns_rps(self) -> float:
        return self["sustainable_turns_rps"]

    @property
    def limited_by(self) -> str:
        return self["limited_by"]

    @property
    def gap(self) -> Optional[float]:
        return self.get("gap")

    @property
    def tiers(self) -> "list[dict[str, Any]]":
        return self["tiers"]

    @property
    def classes(self) -> "list[dict[str, Any]]":
        return self["classes"]

    @property
    def levers(self) -> "list[dict[str, Any]]":
        return self["levers"]


def capacity(*, target_turns_rps: Optional[float] = None, fixture: Folder = None) -> Capacity:
    """What an LLM product needs to serve ``target_turns_rps`` turns a second, as
    ``stampede capacity --json`` over the gateway fixture (``fixture=`` a TOML file,
    default the shipped one): a :class:`Capacity`, per tier and meter what binds first.

    >>> import stampede
    >>> needed = stampede.capacity(target_turns_rps=1000)
    >>> needed.limited_by, round(needed.sustainable_turns_rps, 2)
    ('tier opus (server slots, shared)', 6.61)
    >>> needed.levers[0]["lever"]
    'baseline'
    """
    documents, _, exit_code = _call(
        ["capacity", "--json", *_options(target_turns_rps=target_turns_rps, fixture=fixture)]
    )
    return _document(documents, exit_code, Capacity)


def report(folder: Union[str, "os.PathLike[str]", Result]) -> Path:
    """Writes ``report.html`` into an output folder (a run's, a verify's, a rare's),
    as ``stampede report``, and returns its path.

    >>> import tempfile, stampede
    >>> kept = stampede.run("mg1", replicas=4, out=tempfile.mkdtemp(), progress=False, report=False)
    >>> page = stampede.report(kept)
    >>> page.name, page.read_text().startswith("<!DOCTYPE html>")
    ('report.html', True)
    """
    if isinstance(folder, Result):
        if folder.path is None:
            raise ValueError("report reads an output folder: run with out=… to keep one")
        folder = folder.path
    _call(["report", "--", os.fspath(folder)])
    return Path(os.fspath(folder)) / "report.html"


def compare(
    a: Union[str, "os.PathLike[str]", Result],
    b: Union[str, "os.PathLike[str]", Result],
    **options: Any,
) -> Document:
    """Did anything change between two output folders of one scenario? As
    ``stampede compare A B --json``: every metric's difference with its interval and
    test; ``.ok`` is False when something changed significantly. ``a`` and ``b`` are
    folders, or results run with ``out=``. Other keyword arguments are the CLI's
    flags (``alpha=``, ``tolerance=``, ``metric=[…]``)."""

    def folder(side: Union[str, "os.PathLike[str]", Result]) -> str:
        if isinstance(side, Result):
            if side.path is None:
                raise ValueError("compare reads output folders: run with out=… to keep one")
            return os.fspath(side.path)
        return os.fspath(side)

    documents, _, exit_code = _call(["compare", "--json", *_options(**options), "--", folder(a), folder(b)])
    return _document(documents, exit_code)


def fit(file: Union[str, "os.PathLike[str]"], **options: Any) -> Document:
    """Fits distributions to measured latencies, as ``stampede fit FILE --json``:
    each family's parameters and Kolmogorov–Smirnov distance, and the TOML value of
    the best. Keyword arguments are the CLI's flags (``column=``, ``unit=``,
    ``metric=``, ``label=[…]``, ``tail=``)."""
    documents, _, exit_code = _call(["fit", "--json", *_options(**options), "--", os.fspath(file)])
    return _document(documents, exit_code)
