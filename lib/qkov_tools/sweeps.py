"""Sweeps as data: many runs of one figure notebook, declared once in ``sweeps/<name>.yaml``.

    snakemake --cores 2 sweep_fig4_small                          # run a sweep (the Snakefile)
    python -m qkov_tools.sweeps list                              # the sweeps and their sets
    python -m qkov_tools.sweeps status sweeps/fig4-small.yaml     # done / failed / missing, with logs

A sweep file names a figure and a grid of parameters; every combination is one set::

    figure: paper-fig4          # notebooks/paper-fig4.ipynb, qkov.figures.paper_fig4.Parameters
    base: {target_loss: 1e-3}   # parameters every set shares (optional)
    grid: {M: [10, 20], seeds: [[1], [2]]}  # each parameter's values, one per set: 4 sets
    same: {variant_ratios: ratios}  # a parameter that takes a grid column's value (optional)
    plot: {x: r, y: [alpha], group: M, where: {loss: 0.01}, logx: true}  # the gathered figure:
                                # columns of results.csv, rows where `where` holds (optional)
    threads: 1                  # cores per set (default: its figure's SPEC.threads)
    resources: {mem_mb: 2000, runtime: 10}  # per set, for a cluster (ignored locally;
                                # default: its figure's SPEC.resources)

The grid is expanded into a table (pandas), and Snakemake's ``Paramspace`` names each set from
its grid values (``M~10_seeds~1``): its folder ``artifacts/sweeps/<name>/<set>/`` and the
Snakefile's ``{set}`` wildcard. Every set is checked with the figure's own ``Parameters`` when
the file is read, so a typo or a wrong type fails before any job starts, naming the file, the
set and the parameter. The Snakefile makes one job per set (a papermill run of the notebook
into the set's folder, the executed notebook kept there as ``notebook.ipynb``, stored last)
and a gather job ``sweep_<name>`` that runs once every set's job is done and writes
``results.csv`` (every set's summary rows, with the set and its grid values in front) and
``figure.{png,pdf,svg}``. A set's parameters are its job's ``params``: editing them re-runs it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from qkov import figures
from qkov.artifacts import repo_root
from qkov.sets import write_table

SWEEPS_DIR = Path("sweeps")  # the sweep files, relative to the repository (the workflow)
OUTPUT_DIR = Path("artifacts") / "sweeps"  # relative to the working directory of the run
LOG_DIR = Path("artifacts") / "logs" / "sweeps"
SLURM_LOG_DIR = Path(".snakemake") / "slurm_logs"  # where the SLURM executor puts job logs
SET_FILES = ("summary.json", "notebook.ipynb")  # notebook.ipynb last: the set is complete
GATHERED = ("results.csv", "figure.png", "figure.pdf", "figure.svg")
KEYS = {"figure", "description", "base", "grid", "same", "plot", "threads", "resources"}
PLOT_KEYS = {"x", "y", "group", "where", "logx", "logy"}


class SweepError(ValueError):
    """A sweep file that cannot be run: malformed YAML, an unknown key, a bad parameter set."""


class YamlLoader(yaml.SafeLoader):
    """YAML as people write numbers: ``1e-3`` is a float (YAML 1.1 reads it as a string)."""


YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)[eE][-+]?\d+$"), list("-+0123456789."))


def _text(value: Any) -> str:
    """A grid value as it appears in a set's name: 0.1, 10, a-b for lists."""
    if isinstance(value, (list, tuple)):
        return "-".join(_text(v) for v in value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}"
    return re.sub(r"[^A-Za-z0-9.]+", "-", str(value)).strip("-") or "x"


@dataclass(frozen=True)
class Sweep:
    name: str
    path: Path
    figure_id: str
    sets: dict[str, dict]  # set name (Paramspace's instance pattern) -> its grid values
    base: dict
    same: dict
    plot: dict
    threads: int
    resources: dict
    pattern: str  # Paramspace's wildcard pattern: "{set}"
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

    def values(self, set_id: str) -> dict:
        """What the set's notebook is given: the base, the set's grid values, the copies."""
        own = self.sets[set_id]
        return {**self.base, **own, **{name: own[column] for name, column in self.same.items()}}


def _check_set(where: str, figure_id: str, values: dict) -> None:
    """The set's parameters, checked by the figure's own ``Parameters``."""
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
    except (TypeError, ValueError) as err:  # ParameterError names the parameter; a check
        raise SweepError(f"{where}: {err}") from None  # between fields names its fields


def _mapping(path: Path, key: str, value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise SweepError(f"{path}: {key!r} must be a mapping of names to values, got {value!r}")
    return value


def _grid(path: Path, doc: dict) -> tuple[dict[str, dict], str]:
    """Every combination of the grid's values (a pandas table, values kept as YAML gave
    them), named by Paramspace: set name -> grid values, and the wildcard pattern."""
    import pandas as pd
    from snakemake.utils import Paramspace

    grid = _mapping(path, "grid", doc.get("grid"))
    if not grid:
        raise SweepError(f"{path}: 'grid' must map parameter names to lists of values, one "
                         f"per set, got {doc.get('grid')!r}")
    for name, values in grid.items():
        if not isinstance(values, list) or not values:
            raise SweepError(f"{path}: grid parameter {name!r}: expected a non-empty list "
                             f"of values, got {values!r}")
    table = pd.DataFrame(list(itertools.product(*grid.values())), columns=list(grid),
                         dtype=object)
    space = Paramspace(table.map(_text), filename_params="*", single_wildcard="set")
    names = list(space.instance_patterns)
    for k, name in enumerate(names):
        if name in names[:k]:
            raise SweepError(f"{path}: set {name!r} appears twice: give each grid parameter "
                             "distinct values")
    return dict(zip(names, table.to_dict("records"))), space.wildcard_pattern


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
        raise SweepError(f"{path}: expected a mapping with 'figure' and 'grid'")
    unknown = sorted(set(map(str, doc)) - KEYS)
    if unknown:
        raise SweepError(f"{path}: unknown key {unknown[0]!r}; a sweep file has "
                         f"{', '.join(sorted(KEYS))}")
    figure_id = doc.get("figure")
    specs = figures.specs()
    if figure_id not in specs:
        raise SweepError(f"{path}: 'figure' must be one of {', '.join(specs)}, got {figure_id!r}")
    sets, pattern = _grid(path, doc)
    same = _mapping(path, "same", doc.get("same"))
    for name, column in same.items():
        if column not in next(iter(sets.values())):
            raise SweepError(f"{path}: same: {name!r} must name a grid parameter, got {column!r}")

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
    sweep = Sweep(path.stem, path, figure_id, sets, _mapping(path, "base", doc.get("base")),
                  same, plot, threads, resources, pattern, str(doc.get("description", "")))
    for set_id in sets:
        _check_set(f"{path}: set {set_id!r}", figure_id, sweep.values(set_id))
    return sweep


def load_all(folder: str | Path) -> list[Sweep]:
    """Every ``*.yaml`` sweep in ``folder`` (none if it does not exist), checked."""
    sweeps = [load(path) for path in sorted(Path(folder).glob("*.yaml"))]
    names = [s.rule for s in sweeps]
    for s in sweeps:
        if names.count(s.rule) > 1:
            raise SweepError(f"{s.path}: another sweep has the rule name {s.rule}")
    return sweeps


# --- state of a sweep -----------------------------------------------------------------------


@dataclass(frozen=True)
class SetState:
    set: str
    state: str  # done; failed (a log reports an error); incomplete (started, not finished:
    #             running, or killed without a word); missing
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
    """Each set's state, with its run log and any SLURM job logs (paths relative to ``root``).
    Whether a done set's parameters changed since is Snakemake's to say (``snakemake -n``)."""
    root = Path(root)
    out = []
    for set_id in sweep.sets:
        log = root / sweep.log(set_id)
        slurm = tuple(str(p.relative_to(root)) for p in
                      sorted((root / SLURM_LOG_DIR / f"rule_{sweep.set_rule}" / set_id).glob("*.log")))
        state, error = "missing", ""
        if all((root / path).is_file() for path in sweep.set_outputs(set_id)):
            state = "done"
        elif log.is_file() or slurm:
            error = _last_error(log) if log.is_file() else ""
            if not error and slurm:
                error = _last_error(root / slurm[-1])
            state = "failed" if error else "incomplete"
        out.append(SetState(set_id, state, sweep.log(set_id) if log.is_file() else None,
                            slurm, error))
    return out


def report(sweep: Sweep, found: list[SetState]) -> str:
    """A summary a researcher can act on: every set that is not done, with its parameters,
    the last error line and where to read the whole log."""
    counts = {k: sum(st.state == k for st in found)
              for k in ("done", "failed", "incomplete", "missing")}
    lines = [f"sweep {sweep.name} ({sweep.path}): " + ", ".join(f"{n} {k}" for k, n in
                                                              counts.items() if n)]
    for st in found:
        if st.state == "done":
            continue
        lines.append(f"  {st.state:10s} {st.set}  {json.dumps(sweep.sets[st.set])}")
        if st.error:
            lines.append(f"             error: {st.error}")
        for log in ([st.log] if st.log else []) + list(st.slurm_logs):
            lines.append(f"             log:   {log}")
    lines.append(f"  `snakemake --cores 2 {sweep.rule}` (or with --profile profiles/slurm) runs "
                 "only the sets not done or whose parameters changed; add -n to list them")
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
    """Every set's summary rows, each with ``set`` and the set's grid values in front.
    Refuses (SweepError with the report) unless every set is done."""
    found = states(sweep, root)
    if any(st.state != "done" for st in found):
        raise SweepError("not gathering a partial sweep: " + report(sweep, found))
    rows = []
    for set_id, own in sweep.sets.items():
        summary = json.loads((Path(root) / sweep.set_folder(set_id) / "summary.json").read_text())
        for row in summary["rows"]:
            front = {"set": set_id}
            for name, value in own.items():
                front[f"param.{name}" if name in row or name == "set" else name] = _cell(value)
            rows.append({**front, **{k: _cell(v) for k, v in row.items()}})
    return rows


def plot(sweep: Sweep, rows: list[dict]):
    """One panel per y column: y against x, one line per group; at each x the mean over the
    sets, and their range as a band where several sets share an x (e.g. seeds). Only the
    rows where every ``where`` column has its value are drawn (all are in results.csv)."""
    import textwrap

    import pandas as pd
    from matplotlib.ticker import NullFormatter

    from qkov.plotting import COLUMN_WIDTH_IN, house_style, new_figure

    spec = sweep.plot
    table = pd.DataFrame(rows)
    for key in [spec["x"], *spec["y"], *spec["where"]] + ([spec["group"]] if spec["group"] else []):
        if key not in table:
            raise SweepError(f"{sweep.path}: plot column {key!r} is not in results.csv; its "
                             f"columns: {', '.join(table)}")
    number = lambda column: pd.to_numeric(column, errors="coerce")  # noqa: E731
    for key, value in spec["where"].items():
        table = table[(table[key] == value) | (number(table[key]) == number(value))]
    if table.empty:
        raise SweepError(f"{sweep.path}: no row of results.csv has {spec['where']}")
    groups = table.groupby(spec["group"], sort=False) if spec["group"] else [(None, table)]
    with house_style():
        # Drawn for the book's column, two panels a row (publish's 9 pt rule holds here too).
        columns = min(len(spec["y"]), 2)
        rows_of_panels = -(-len(spec["y"]) // columns)
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 3.2 * rows_of_panels + 0.8))
        axes = fig.subplots(rows_of_panels, columns, squeeze=False).ravel()
        for ax in axes[len(spec["y"]):]:
            ax.set_axis_off()
        for ax, y in zip(axes, spec["y"]):
            for group, part in groups:
                at_x = number(part[y]).groupby(number(part[spec["x"]])).agg(
                    ["mean", "min", "max", "size"])
                label = None if group is None else f"{spec['group']} = {group}"
                line, = ax.plot(at_x.index, at_x["mean"], "o-", ms=4, label=label)
                if (at_x["size"] > 1).any():
                    ax.fill_between(at_x.index, at_x["min"], at_x["max"],
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
                       ("gather", "results.csv and the figure of a complete sweep (what the "
                        "gather job runs)")):
        p = sub.add_parser(name, help=text)
        p.add_argument("sweep", type=Path)
        p.add_argument("--root", type=Path, default=Path("."), help="the workflow's directory")
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            for sweep in load_all(args.folder):
                about = f": {sweep.description}" if sweep.description else ""
                print(f"{sweep.rule}: {len(sweep.sets)} sets of {sweep.figure_id} "
                      f"({', '.join(sweep.sets)}){about}")
            return 0
        sweep = load(args.sweep)
        if args.command == "status":
            found = states(sweep, args.root)
            print(report(sweep, found))
            return 0 if all(st.state == "done" for st in found) else 1
        print("wrote", ", ".join(str(p) for p in gather(sweep, args.root)))
    except SweepError as err:
        print(err, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
