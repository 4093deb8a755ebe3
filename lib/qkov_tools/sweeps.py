"""Sweeps as data: many runs of one figure notebook, declared once in ``sweeps/<name>.yaml``.

    python -m qkov_tools.sweeps list                              # the sweeps and their sets
    python -m qkov_tools.sweeps status sweeps/fig4-small.yaml     # done / failed / missing, with logs
    python -m qkov_tools.sweeps run sweeps/fig4-small.yaml SET    # one set (what a Snakemake job runs)
    python -m qkov_tools.sweeps gather sweeps/fig4-small.yaml     # results.csv + figure, if complete

A sweep file names a figure and its parameter sets, either listed or as a grid::

    figure: paper-fig4          # notebooks/paper-fig4.ipynb, qkov.figures.paper_fig4.Parameters
    base: {target_loss: 1e-3}   # parameters every set shares (optional)
    sets:                       # a list of sets (each may name itself with `id`) ...
      - {id: small, m: 2}
    grid: {M: [10, 20]}         # ... or a grid: every combination (not both)
    plot: {x: r, y: [alpha], where: {loss: 0.01}, logx: true}  # the gathered figure: columns
                                # of results.csv, rows where `where` holds (optional)
    threads: 1                  # cores per set (default: its figure's SPEC.threads)
    resources: {mem_mb: 2000, runtime: 10}  # per set, for a cluster (ignored locally;
                                # default: its figure's SPEC.resources)

Every set is checked with the figure's own ``Parameters`` when the file is read, so a typo or
a wrong type fails before any job starts, naming the file, the set and the parameter. The
Snakefile makes one job per set (a papermill run of the notebook into
``artifacts/sweeps/<name>/<set>/``, the executed notebook kept there as ``notebook.ipynb``)
and a gather job ``sweep_<name>`` that writes ``results.csv`` (every set's summary rows, with
the set and its parameters) and ``figure.{png,pdf,svg}``. A set counts as done only when its
``notebook.ipynb`` exists (stored last, atomically, after the whole notebook ran) and its
``summary.json`` holds the set's parameters; the gather refuses to draw anything else.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from qkov import figures
from qkov.artifacts import repo_root, write_table

from .notebooks import run as run_notebook

SWEEPS_DIR = Path("sweeps")  # the sweep files, relative to the repository (the workflow)
OUTPUT_DIR = Path("artifacts") / "sweeps"  # relative to the working directory of the run
LOG_DIR = Path("artifacts") / "logs" / "sweeps"
SLURM_LOG_DIR = Path(".snakemake") / "slurm_logs"  # where the SLURM executor puts job logs
SET_FILES = ("summary.json", "notebook.ipynb")  # notebook.ipynb last: the set is complete
GATHERED = ("results.csv", "figure.png", "figure.pdf", "figure.svg")
KEYS = {"figure", "description", "base", "sets", "grid", "plot", "threads", "resources"}
PLOT_KEYS = {"x", "y", "group", "where", "logx", "logy"}
_SET_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class SweepError(ValueError):
    """A sweep file that cannot be run: malformed YAML, an unknown key, a bad parameter set."""


class YamlLoader(yaml.SafeLoader):
    """YAML as people write numbers: ``1e-3`` is a float (YAML 1.1 reads it as a string)."""


YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$"), list("-+0123456789."))


def _text(value: Any) -> str:
    """A parameter value as it appears in a set id: 0.1, 10, a-b for lists."""
    if isinstance(value, (list, tuple)):
        return "-".join(_text(v) for v in value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}"
    return re.sub(r"[^A-Za-z0-9._]+", "-", str(value)).strip("-") or "x"


@dataclass(frozen=True)
class ParameterSet:
    """One run of a sweep: ``own`` are the values that make it a set (the set's entries or
    grid point), ``values`` those plus the sweep's ``base``: what the notebook is given."""

    id: str
    own: dict
    values: dict


@dataclass(frozen=True)
class Sweep:
    name: str
    path: Path
    figure_id: str
    sets: tuple[ParameterSet, ...]
    plot: dict
    threads: int
    resources: dict
    description: str = ""

    @property
    def notebook(self) -> str:
        return figures.specs()[self.figure_id].notebook

    @property
    def rule(self) -> str:
        """The gather rule, the target that runs the whole sweep: ``snakemake sweep_<name>``."""
        return "sweep_" + self.name.replace("-", "_")

    @property
    def set_rule(self) -> str:
        return self.rule + "_set"

    @property
    def folder(self) -> Path:
        return OUTPUT_DIR / self.name

    def set_folder(self, set_id: str) -> Path:
        return self.folder / set_id

    def set_outputs(self, set_id: str) -> list[str]:
        return [str(self.set_folder(set_id) / name) for name in SET_FILES]

    def log(self, set_id: str) -> str:
        return str(LOG_DIR / self.name / f"{set_id}.log")

    @property
    def gathered(self) -> list[str]:
        return [str(self.folder / name) for name in GATHERED]

    def get(self, set_id: str) -> ParameterSet:
        for s in self.sets:
            if s.id == set_id:
                return s
        raise SweepError(f"{self.path}: no set {set_id!r}; its sets: "
                         f"{', '.join(s.id for s in self.sets)}")


def _check_set(path: Path, figure_id: str, set_id: str, values: dict) -> None:
    """The set's parameters, checked by the figure's own ``Parameters``."""
    from qkov.checks import ParameterError

    where = f"{path}: set {set_id!r}"
    if "artifacts_dir" in values:
        raise SweepError(f"{where}: parameter 'artifacts_dir': set by the sweep "
                         f"(artifacts/sweeps/<sweep>/<set>/), not by its file")
    Parameters = figures.module(figure_id).Parameters
    unknown = [name for name in values if name not in Parameters.names()]
    if unknown:
        raise SweepError(f"{where}: parameter {unknown[0]!r}: unknown parameter; {figure_id} "
                         f"takes {', '.join(n for n in Parameters.names() if n != 'artifacts_dir')}")
    try:
        Parameters(**values)
    except ParameterError as err:
        raise SweepError(f"{where}: {err}") from None
    except (TypeError, ValueError) as err:  # a check between fields or of a derived value
        raise SweepError(f"{where}: {err}") from None


def _mapping(path: Path, key: str, value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise SweepError(f"{path}: {key!r} must be a mapping of names to values, got {value!r}")
    return value


def _sets(path: Path, doc: dict) -> list[ParameterSet]:
    base = _mapping(path, "base", doc.get("base"))
    if ("sets" in doc) == ("grid" in doc):
        raise SweepError(f"{path}: give either 'sets' (a list of parameter sets) or 'grid' "
                         "(a mapping of parameter names to lists of values), not both or neither")
    if "sets" in doc:
        listed = doc["sets"]
        if not isinstance(listed, list) or not listed:
            raise SweepError(f"{path}: 'sets' must be a non-empty list of mappings, got {listed!r}")
        entries = []
        for k, entry in enumerate(listed):
            entry = dict(_mapping(path, f"sets item {k}", entry))
            entries.append((entry.pop("id", None), entry))
    else:
        grid = _mapping(path, "grid", doc["grid"])
        if not grid:
            raise SweepError(f"{path}: 'grid' is empty")
        for name, values in grid.items():
            if not isinstance(values, list) or not values:
                raise SweepError(f"{path}: grid parameter {name!r}: expected a non-empty list "
                                 f"of values, got {values!r}")
        entries = [(None, dict(zip(grid, combo))) for combo in itertools.product(*grid.values())]
    sets = []
    for k, (set_id, own) in enumerate(entries):
        set_id = str(set_id) if set_id is not None else (
            "_".join(f"{name}-{_text(value)}" for name, value in own.items()) or f"set-{k}")
        if not _SET_ID.match(set_id):
            raise SweepError(f"{path}: set {set_id!r} (item {k}): a set id is letters, digits, "
                             "'.', '_' and '-', starting with a letter or digit")
        if any(s.id == set_id for s in sets):
            raise SweepError(f"{path}: set {set_id!r} appears twice (item {k}); give each "
                             "set a distinct `id`")
        sets.append(ParameterSet(set_id, own, {**base, **own}))
    return sets


def load(path: str | Path) -> Sweep:
    """Read and check a sweep file (see the module's docstring)."""
    path = Path(path)
    try:
        doc = yaml.load(path.read_text(), Loader=YamlLoader)
    except OSError as err:
        raise SweepError(f"{path}: cannot read the sweep file ({err.strerror})") from None
    except yaml.YAMLError as err:
        raise SweepError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(doc, dict):
        raise SweepError(f"{path}: expected a mapping with 'figure' and 'sets' or 'grid'")
    unknown = sorted(set(map(str, doc)) - KEYS)
    if unknown:
        raise SweepError(f"{path}: unknown key {unknown[0]!r}; a sweep file has "
                         f"{', '.join(sorted(KEYS))}")
    figure_id = doc.get("figure")
    specs = figures.specs()
    if figure_id not in specs:
        raise SweepError(f"{path}: 'figure' must be one of {', '.join(specs)}, got {figure_id!r}")
    sets = _sets(path, doc)
    for s in sets:
        _check_set(path, figure_id, s.id, s.values)

    plot = _mapping(path, "plot", doc.get("plot"))
    bad = sorted(set(plot) - PLOT_KEYS)
    if bad or not isinstance(plot.get("x"), str) or not plot.get("y"):
        raise SweepError(f"{path}: 'plot' needs x (a column of results.csv) and y (one column "
                         f"or a list), optionally group, where, logx, logy; got {plot or None!r}")
    y = plot["y"] if isinstance(plot["y"], list) else [plot["y"]]
    plot = {"x": plot["x"], "y": [str(c) for c in y], "group": plot.get("group"),
            "where": _mapping(path, "plot: where", plot.get("where")),
            "logx": bool(plot.get("logx")), "logy": bool(plot.get("logy"))}

    threads = doc.get("threads", specs[figure_id].threads)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise SweepError(f"{path}: 'threads' must be an integer >= 1, got {threads!r}")
    resources = {**specs[figure_id].resources,
                 **_mapping(path, "resources", doc.get("resources"))}
    for name, value in resources.items():
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise SweepError(f"{path}: resource {name!r}: expected an integer or a string, "
                             f"got {value!r}")
    return Sweep(path.stem, path, figure_id, tuple(sets), plot, threads, resources,
                 str(doc.get("description", "")))


def load_all(folder: str | Path) -> list[Sweep]:
    """Every ``*.yaml`` sweep in ``folder`` (none if it does not exist), checked."""
    sweeps = [load(path) for path in sorted(Path(folder).glob("*.yaml"))]
    names = [s.rule for s in sweeps]
    for s in sweeps:
        if names.count(s.rule) > 1:
            raise SweepError(f"{s.path}: another sweep has the rule name {s.rule}")
    return sweeps


# --- one set --------------------------------------------------------------------------------


def run_set(sweep: Sweep, set_id: str, root: str | Path = ".") -> Path:
    """Run one set: the figure's notebook with the set's parameters, its outputs in the set's
    folder below ``root`` (the working directory of the workflow), the executed notebook
    stored there last. Returns that folder."""
    s = sweep.get(set_id)
    folder = (Path(root) / sweep.set_folder(set_id)).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "notebook.ipynb").unlink(missing_ok=True)  # done only once run again in full
    notebook = repo_root() / sweep.notebook
    print(f"sweep {sweep.name}, set {set_id}: {json.dumps(s.values)}", flush=True)
    run_notebook(notebook, folder / "notebook.ipynb", {**s.values, "artifacts_dir": str(folder)})
    return folder


# --- state of a sweep -----------------------------------------------------------------------


def _expected(sweep: Sweep, s: ParameterSet) -> dict:
    """The parameters a finished set's summary.json records (all but its folder)."""
    from qkov.artifacts import _plain

    given = figures.module(sweep.figure_id).Parameters(**s.values).given
    given.pop("artifacts_dir", None)
    return json.loads(json.dumps(_plain(given)))


@dataclass(frozen=True)
class SetState:
    set: ParameterSet
    state: str  # done; stale (run with other parameters); failed (a log reports an error);
    #             incomplete (started, not finished: running, or killed without a word); missing
    log: str | None
    slurm_logs: tuple[str, ...]
    error: str = ""


def _last_error(log: Path) -> str:
    """The last line of a log that reports an error (a Python exception, SLURM's cancel)."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines()]
    errors = [line for line in lines
              if re.search(r"(Error|Exception)\b|\berror:|CANCELLED|TIME LIMIT|NODE_FAIL", line)]
    return errors[-1][:300] if errors else ""


def states(sweep: Sweep, root: str | Path = ".") -> list[SetState]:
    """Each set's state, with its run log and any SLURM job logs (paths relative to ``root``)."""
    root = Path(root)
    out = []
    for s in sweep.sets:
        folder = root / sweep.set_folder(s.id)
        log = root / sweep.log(s.id)
        slurm = tuple(str(p.relative_to(root)) for p in
                      sorted((root / SLURM_LOG_DIR / f"rule_{sweep.set_rule}" / s.id).glob("*.log")))
        log_text = str(log.relative_to(root)) if log.is_file() else None
        state, error = "missing", ""
        if all((folder / name).is_file() for name in SET_FILES):
            try:
                recorded = json.loads((folder / "summary.json").read_text())["parameters"]
                recorded.pop("artifacts_dir", None)
            except (OSError, ValueError, KeyError, AttributeError):
                recorded = None
            state = "done" if recorded == _expected(sweep, s) else "stale"
        elif log.is_file() or slurm:
            error = _last_error(log) if log.is_file() else ""
            if not error and slurm:
                error = _last_error(root / slurm[-1])
            state = "failed" if error else "incomplete"
        out.append(SetState(s, state, log_text, slurm, error))
    return out


def report(sweep: Sweep, found: list[SetState]) -> str:
    """A summary a researcher can act on: every set that is not done, with its parameters,
    the last error line and where to read the whole log."""
    counts = {k: sum(st.state == k for st in found)
              for k in ("done", "failed", "incomplete", "stale", "missing")}
    lines = [f"sweep {sweep.name} ({sweep.path}): " + ", ".join(f"{n} {k}" for k, n in
                                                              counts.items() if n)]
    for st in found:
        if st.state == "done":
            continue
        lines.append(f"  {st.state:10s} {st.set.id}  {json.dumps(st.set.own)}")
        if st.error:
            lines.append(f"             error: {st.error}")
        for log in ([st.log] if st.log else []) + list(st.slurm_logs):
            lines.append(f"             log:   {log}")
    if counts["done"] < len(found):
        lines.append(f"  re-run `snakemake --cores 2 {sweep.rule}` (or with --profile "
                     "profiles/slurm): only the sets not done run again")
    return "\n".join(lines)


def report_unfinished(sweeps: list[Sweep], root: str | Path = ".") -> None:
    """After a failed workflow: the report of each sweep that was started and is not done."""
    for sweep in sweeps:
        found = states(sweep, root)
        started = any(st.state != "missing" for st in found)
        if started and any(st.state != "done" for st in found):
            print(report(sweep, found), file=sys.stderr)


# --- gathering ------------------------------------------------------------------------------


def _cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def gather_rows(sweep: Sweep, root: str | Path = ".") -> list[dict]:
    """Every set's summary rows, each with ``set`` and the set's own parameters in front.
    Refuses (SweepError with the report) unless every set is done."""
    found = states(sweep, root)
    if any(st.state != "done" for st in found):
        raise SweepError("not gathering a partial sweep: " + report(sweep, found))
    rows = []
    for s in sweep.sets:
        summary = json.loads((Path(root) / sweep.set_folder(s.id) / "summary.json").read_text())
        for row in summary["rows"]:
            front = {"set": s.id}
            for name, value in s.own.items():
                front[f"param.{name}" if name in row or name == "set" else name] = _cell(value)
            rows.append({**front, **{k: _cell(v) for k, v in row.items()}})
    columns = list(dict.fromkeys(k for row in rows for k in row))  # sets may vary different
    return [{c: row.get(c, "") for c in columns} for row in rows]  # parameters: one header


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def plot(sweep: Sweep, rows: list[dict]):
    """One panel per y column: y against x, one line per group; at each x the mean over the
    sets, and their range as a band where several sets share an x (e.g. seeds). Only the
    rows where every ``where`` column has its value are drawn (all are in results.csv)."""
    import textwrap

    import numpy as np
    from matplotlib.ticker import NullFormatter

    from qkov.plotting import COLUMN_WIDTH_IN, house_style, new_figure

    spec = sweep.plot
    columns = list(rows[0])
    for key in [spec["x"], *spec["y"], *spec["where"]] + ([spec["group"]] if spec["group"] else []):
        if key not in columns:
            raise SweepError(f"{sweep.path}: plot column {key!r} is not in results.csv; its "
                             f"columns: {', '.join(columns)}")
    rows = [r for r in rows if all(r[k] == v or _number(r[k]) == _number(v)
                                   for k, v in spec["where"].items())]
    if not rows:
        raise SweepError(f"{sweep.path}: no row of results.csv has {spec['where']}")
    groups = list(dict.fromkeys(row[spec["group"]] for row in rows)) if spec["group"] else [None]
    with house_style():
        # Drawn for the book's column, two panels a row (publish's 9 pt rule holds here too).
        columns = min(len(spec["y"]), 2)
        rows_of_panels = -(-len(spec["y"]) // columns)
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 3.2 * rows_of_panels + 0.8))
        axes = fig.subplots(rows_of_panels, columns, squeeze=False).ravel()
        for ax in axes[len(spec["y"]):]:
            ax.set_axis_off()
        for ax, y in zip(axes, spec["y"]):
            for group in groups:
                mine = [r for r in rows if group is None or r[spec["group"]] == group]
                xs = sorted({_number(r[spec["x"]]) for r in mine} - {math.nan})
                by_x = [[_number(r[y]) for r in mine if _number(r[spec["x"]]) == x] for x in xs]
                mean = [np.nanmean(v) if np.isfinite(v).any() else np.nan for v in by_x]
                label = None if group is None else f"{spec['group']} = {group}"
                line, = ax.plot(xs, mean, "o-", ms=4, label=label)
                if any(len(v) > 1 for v in by_x):
                    ax.fill_between(xs, [np.nanmin(v) for v in by_x], [np.nanmax(v) for v in by_x],
                                    color=line.get_color(), alpha=0.2, lw=0)
            ax.set_xlabel(spec["x"])
            ax.set_ylabel(y)
            ax.set_xscale("log" if spec["logx"] else "linear")
            ax.set_yscale("log" if spec["logy"] else "linear")
            for axis in (ax.xaxis, ax.yaxis):  # short log ranges: minor labels would collide
                axis.set_minor_formatter(NullFormatter())
        if spec["group"]:
            fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center",
                       ncols=min(len(groups), 4))
        where = ", ".join(f"{k} = {v}" for k, v in spec["where"].items())
        fig.suptitle(textwrap.fill(f"sweep {sweep.name}: {len(sweep.sets)} sets of "
                                   f"{sweep.figure_id}" + (f" ({where})" if where else ""), 60))
    return fig


def gather(sweep: Sweep, root: str | Path = ".") -> list[Path]:
    """Write ``results.csv`` and the figure of a complete sweep; refuse a partial one."""
    from qkov.plotting import save_figure

    rows = gather_rows(sweep, root)
    folder = Path(root) / sweep.folder
    fig = plot(sweep, rows)
    write_table(folder / "results.csv", rows)
    return [folder / "results.csv", *save_figure(fig, folder)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qkov_tools.sweeps", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    list_p = sub.add_parser("list", help="the sweeps of a folder and their sets")
    list_p.add_argument("folder", nargs="?", type=Path, default=repo_root() / SWEEPS_DIR)
    for name, text in (("status", "each set's state, with its log"),
                       ("gather", "results.csv and the figure of a complete sweep")):
        p = sub.add_parser(name, help=text)
        p.add_argument("sweep", type=Path)
        p.add_argument("--root", type=Path, default=Path("."), help="the workflow's directory")
    run_p = sub.add_parser("run", help="run one set (what a Snakemake job runs)")
    run_p.add_argument("sweep", type=Path)
    run_p.add_argument("set")
    run_p.add_argument("--root", type=Path, default=Path("."), help="the workflow's directory")
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            for sweep in load_all(args.folder):
                print(f"{sweep.rule}: {len(sweep.sets)} sets of {sweep.figure_id} "
                      f"({', '.join(s.id for s in sweep.sets)})")
            return 0
        sweep = load(args.sweep)
        if args.command == "status":
            found = states(sweep, args.root)
            print(report(sweep, found))
            return 0 if all(st.state == "done" for st in found) else 1
        if args.command == "run":
            run_set(sweep, args.set, args.root)
        else:
            print("wrote", ", ".join(str(p) for p in gather(sweep, args.root)))
    except SweepError as err:
        print(err, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
