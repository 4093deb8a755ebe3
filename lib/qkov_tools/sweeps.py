"""Sweeps as data: many runs of one figure notebook, declared in ``sweeps/<name>.yaml``::

    figure: paper-fig4                    # the figure: its notebook and its Parameters
    base: {target_loss: 1e-3}             # parameters every set shares
    grid: {M: [10, 20], seeds: [[1], [2]]}  # every combination is one set: 4 sets
    same: {variant_ratios: ratios}        # a parameter that takes a grid column's value
    plot: {x: r, y: [alpha], group: M, where: {loss: 0.01}, logx: true}  # the gathered figure
    threads: 1                            # per set (default: the figure's SPEC.threads)
    resources: {mem_mb: 2000, runtime: 10}  # per set on a cluster (default: SPEC.resources)

Snakemake's ``Paramspace`` names each set (``M~10_seeds~1``), run into
``artifacts/sweeps/<name>/<set>/``; ``sweep_<name>`` gathers them. ``status`` lists the sets
not done, with their errors and logs.
"""

import argparse
import contextlib
import inspect
import itertools
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from qkov import figures

GATHERED = ("results.csv", "figure.png", "figure.pdf", "figure.svg")
KEYS = ("figure", "base", "grid", "same", "plot", "threads", "resources")
ERROR = re.compile(r"(Error|Exception)\b|\berror:|CANCELLED|TIME LIMIT|NODE_FAIL")


class SweepError(ValueError):
    pass


def _text(value) -> str:  # a grid value in a set's name: 0.1, 1e+300, a-b for a list
    if isinstance(value, list):
        return "-".join(map(_text, value))
    with contextlib.suppress(TypeError, ValueError):  # "1e-3": YAML 1.1's text, the checks' number
        value = float(value)
    return f"{value:g}" if isinstance(value, (int, float)) else re.sub(r"\W+", "-", str(value))


@dataclass(frozen=True)
class Sweep:
    name: str
    path: Path
    notebook: str  # the figure's
    sets: dict  # set name -> its grid values
    base: dict
    same: dict
    plot: dict
    threads: int
    resources: dict

    rule = property(lambda self: "sweep_" + self.name.replace("-", "_"))  # gathers
    folder = property(lambda self: Path("artifacts/sweeps") / self.name)
    gathered = property(lambda self: [str(self.folder / name) for name in GATHERED])

    def outputs(self, set_id: str) -> list[str]:  # notebook.ipynb is stored last
        return [str(self.folder / set_id / name) for name in ("summary.json", "notebook.ipynb")]

    def log(self, set_id: str) -> str:
        return f"artifacts/logs/sweeps/{self.name}/{set_id}.log"

    def values(self, set_id: str) -> dict:
        own = self.sets[set_id]
        return {**self.base, **own, **{name: own[column] for name, column in self.same.items()}}


def load(path) -> Sweep:  # every set checked by the figure's Parameters
    import pandas as pd
    from snakemake.utils import Paramspace

    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise SweepError(f"{path}: {err}") from None
    if not isinstance(doc, dict) or set(doc) - set(KEYS):
        raise SweepError(f"{path}: a sweep file maps {', '.join(KEYS)}; unknown key "
                         f"{sorted(set(doc) - set(KEYS)) if isinstance(doc, dict) else doc!r}")
    spec = figures.specs().get(doc.get("figure"))
    if spec is None:
        raise SweepError(f"{path}: 'figure' must be one of {', '.join(figures.specs())}")
    for key in ("base", "same", "resources", "plot"):
        if not isinstance(doc.get(key) or {}, dict):
            raise SweepError(f"{path}: '{key}' must map names to values, got {doc[key]!r}")
    threads = doc.get("threads", spec.threads)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise SweepError(f"{path}: 'threads' must be a whole number of cores, got {threads!r}")
    grid, same = doc.get("grid"), doc.get("same") or {}
    if not grid or not isinstance(grid, dict) or not all(
            isinstance(v, list) and v for v in grid.values()):
        raise SweepError(f"{path}: 'grid' must map parameters to non-empty lists of values")
    if set(same.values()) - set(grid):
        raise SweepError(f"{path}: 'same' must map parameters to grid parameters, got {same}")
    try:
        inspect.signature(draw).bind(None, **doc.get("plot", {}))
    except TypeError as err:
        raise SweepError(f"{path}: plot: {err}; it takes x, y, group, where, logx") from None

    table = pd.DataFrame(list(itertools.product(*grid.values())), columns=list(grid), dtype=object)
    names = list(Paramspace(table.map(_text), filename_params="*").instance_patterns)
    if len(set(names)) < len(names):
        raise SweepError(f"{path}: two sets have one name: give a parameter distinct values")
    sweep = Sweep(path.stem, path, spec.notebook, dict(zip(names, table.to_dict("records"))),
                  doc.get("base") or {}, same, doc["plot"], threads,
                  {**spec.resources, **doc.get("resources", {})})
    Parameters = figures.module(spec.id).Parameters
    allowed = [name for name in Parameters.names() if name != "artifacts_dir"]  # the sweep's
    for set_id in sweep.sets:
        values = sweep.values(set_id)
        try:
            if unknown := [name for name in values if name not in allowed]:
                raise ValueError(f"parameter {unknown[0]!r}: not a parameter a sweep sets; "
                                 f"{spec.id} takes {', '.join(allowed)}")
            Parameters(**values)
        except (TypeError, ValueError) as err:  # ParameterError names the parameter
            raise SweepError(f"{path}: set {set_id!r}: {err}") from None
    return sweep


def status(sweep: Sweep) -> tuple[str, bool]:
    """Each set not done (failed: a log says why; incomplete: started; missing), with its
    values, last error and logs; and whether all are done."""
    counts, lines = dict.fromkeys(("done", "failed", "incomplete", "missing"), 0), []
    for set_id, own in sweep.sets.items():
        if all(Path(path).is_file() for path in sweep.outputs(set_id)):
            counts["done"] += 1
            continue
        logs = [path for path in [Path(sweep.log(set_id)), *sorted(Path(
            f".snakemake/slurm_logs/rule_{sweep.rule}_set/{set_id}").glob("*.log"))]
            if path.is_file()]
        errors = next(filter(None, ([line.strip() for line in log.read_text(
            errors="replace").splitlines() if ERROR.search(line)] for log in logs)), [])
        state = "failed" if errors else "incomplete" if logs else "missing"
        counts[state] += 1
        lines += [f"  {state:10s} {set_id}  {json.dumps(own)}",
                  *([f"    error: {errors[-1][:300]}"] if errors else []),
                  *[f"    log:   {log}" for log in logs]]
    head = f"sweep {sweep.name} ({sweep.path}): " + ", ".join(
        f"{n} {state}" for state, n in counts.items() if n)
    return "\n".join([head, *lines]), not lines


def draw(table, x: str, y: list, group: str | None = None, where: dict | None = None,
         logx: bool = False):
    """A panel per y column against x, a line per group: the mean over the ``where`` rows."""
    from matplotlib.ticker import NullFormatter

    from qkov.plotting import COLUMN_WIDTH_IN, house_style, new_figure

    for key, value in (where or {}).items():
        table = table[table[key] == value]
    ys = [y] if isinstance(y, str) else y
    with house_style():
        fig = new_figure(figsize=(COLUMN_WIDTH_IN, 2.6 * len(ys)))
        for ax, column in zip(fig.subplots(len(ys), 1, squeeze=False).ravel(), ys):
            table.pivot_table(index=x, columns=group, values=column).plot(
                ax=ax, marker="o", logx=logx, ylabel=column, legend=group is not None)
            ax.xaxis.set_minor_formatter(NullFormatter())  # short log ranges: labels collide
    return fig


def gather(sweep: Sweep) -> None:
    """``results.csv`` (every set's rows, its grid values in front) and the figure."""
    import pandas as pd

    from qkov.plotting import save_figure
    from qkov.sets import write_table

    report, done = status(sweep)
    if not done:
        raise SweepError("not gathering a partial sweep: " + report)
    cell = lambda v: json.dumps(v) if isinstance(v, (list, dict)) else v  # noqa: E731
    rows = []
    for set_id, own in sweep.sets.items():
        for row in json.loads(Path(sweep.folder, set_id, "summary.json").read_text())["rows"]:
            front = {("param." if k in row else "") + k: cell(v) for k, v in own.items()}
            rows.append({"set": set_id, **front, **{k: cell(v) for k, v in row.items()}})
    save_figure(draw(pd.DataFrame(rows), **sweep.plot), sweep.folder)
    write_table(sweep.folder / "results.csv", rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m qkov_tools.sweeps", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["status"])
    parser.add_argument("sweep", type=Path)
    try:
        report, done = status(load(parser.parse_args().sweep))
    except SweepError as err:
        parser.exit(2, f"{err}\n")
    print(report)
    sys.exit(0 if done else 1)  # 1: some set is not done
