# Regenerates every figure: one rule per notebook. Run locally with
#     snakemake --cores 2
# (`make figures` does this inside the project's virtual environment).
#
# Each rule executes its notebook with papermill at the default (paper-scale) parameters
# and stores it in place, stripped of timestamps: the stored outputs are the latest run.
# The library's sources are inputs, so editing lib/qkov re-runs what depends on it; a run
# with nothing changed does nothing. Training rules take both cores (torch uses 2 threads),
# so they run one after the other rather than competing for the cores.

import sys
from pathlib import Path

LIBRARY = sorted(str(p) for p in Path("lib/qkov").rglob("*.py"))
FIGURE_FILES = ["figure.png", "figure.pdf", "figure.svg", "data.csv", "summary.json"]


# Fig. 2 also draws the per-seed std heatmaps and the attention-vs-loss trajectories.
FIG2_EXTRA = [f"{name}.{ext}" for name in ("figure-std", "figure-trajectories")
              for ext in ("png", "pdf", "svg")] + ["heatmaps.csv", "trajectories.csv",
                                                   "matched-loss.csv"]


def figure_outputs(figure_id, extra=()):
    return [f"artifacts/{figure_id}/{name}" for name in [*FIGURE_FILES, *extra]]


# The notebook is rewritten in place by the run; touching the outputs afterwards keeps them
# newer than it, so the next run sees nothing to do. sys.executable: the jobs use the
# environment Snakemake runs in, activated or not.
RUN_NOTEBOOK = (f"({sys.executable} -m qkov.pipeline run {{input.notebook}} && touch {{output}})"
                " > {log} 2>&1")


rule all:
    input:
        figure_outputs("paper-fig4"),
        figure_outputs("paper-fig2", FIG2_EXTRA),
        figure_outputs("paper-fig3", ["curves.csv"]),
        figure_outputs("theory-reduction", ["curves.csv"]),
        figure_outputs("theory-rescaling", ["curves.csv"]),
        figure_outputs("theory-ratio-sweep", ["conditions.csv"]),


rule paper_fig4:
    input:
        notebook="notebooks/paper-fig4.ipynb",
        library=LIBRARY,
    output:
        figure_outputs("paper-fig4"),
    log:
        "artifacts/logs/paper-fig4.log",
    threads: 1
    shell:
        RUN_NOTEBOOK


rule paper_fig2:
    input:
        notebook="notebooks/paper-fig2.ipynb",
        library=LIBRARY,
    output:
        figure_outputs("paper-fig2", FIG2_EXTRA),
    log:
        "artifacts/logs/paper-fig2.log",
    threads: 2
    shell:
        RUN_NOTEBOOK


rule paper_fig3:
    input:
        notebook="notebooks/paper-fig3.ipynb",
        library=LIBRARY,
    output:
        figure_outputs("paper-fig3", ["curves.csv"]),
    log:
        "artifacts/logs/paper-fig3.log",
    threads: 2
    shell:
        RUN_NOTEBOOK


rule theory_reduction:
    input:
        notebook="notebooks/theory-reduction.ipynb",
        library=LIBRARY,
    output:
        figure_outputs("theory-reduction", ["curves.csv"]),
    log:
        "artifacts/logs/theory-reduction.log",
    threads: 2
    shell:
        RUN_NOTEBOOK


# Compares the reduced model with the trained Fig. 2 models at equal held-out loss: reads
# paper-fig2's summary and attention-vs-loss trajectories.
rule theory_rescaling:
    input:
        notebook="notebooks/theory-rescaling.ipynb",
        library=LIBRARY,
        fig2="artifacts/paper-fig2/summary.json",
        fig2_trajectories="artifacts/paper-fig2/trajectories.csv",
    output:
        figure_outputs("theory-rescaling", ["curves.csv"]),
    log:
        "artifacts/logs/theory-rescaling.log",
    threads: 1
    shell:
        RUN_NOTEBOOK


rule theory_ratio_sweep:
    input:
        notebook="notebooks/theory-ratio-sweep.ipynb",
        library=LIBRARY,
    output:
        figure_outputs("theory-ratio-sweep", ["conditions.csv"]),
    log:
        "artifacts/logs/theory-ratio-sweep.log",
    threads: 2
    shell:
        RUN_NOTEBOOK
