# Regenerates every figure: one rule per figure spec (the SPEC of each module of qkov.figures:
# its notebook, outputs, the files of other figures it reads, threads, cluster resources).
# Run locally with
#     snakemake --cores 2
# (`make figures` does this inside the project's virtual environment).
#
# Each rule executes its notebook with papermill at the default (paper-scale) parameters
# and stores it in place, stripped of timestamps: the stored outputs are the latest run.
# QKOV_PIPELINE=1 makes the run write the figure's canonical artifacts/<id>/, which the book
# shows (a run outside the pipeline writes a run folder of its own: qkov.artifacts).
# A rule's inputs are its notebook, the files of other figures it reads, and the library
# modules the notebook imports, directly or through other modules
# (qkov_tools.imports.library_inputs): editing lib/qkov re-runs the figures that use what
# was edited, and only those; a run with nothing changed does nothing. Training rules take
# both cores (each trains in two processes), so they run one after the other rather than
# competing for the cores. The figures whose spec needs a dataset that cannot be downloaded
# here get no rule: their data paths are notebook parameters, which a rule does not pass;
# run them with papermill or as a sweep (sweeps/) that gives the paths.

import sys

from qkov.artifacts import PIPELINE_ENV
from qkov.figures import specs
from qkov_tools.imports import library_inputs

SPECS = [spec for spec in specs().values() if not spec.needs_dataset]

# The notebook is rewritten in place by the run; touching the outputs afterwards keeps them
# newer than it, so the next run sees nothing to do (touch -c: a file the run did not write
# stays missing, and the rule fails). sys.executable: the jobs use the
# environment Snakemake runs in, activated or not.
RUN_NOTEBOOK = (f"({PIPELINE_ENV}=1 {sys.executable} -m qkov_tools run {{input.notebook}}"
                " && touch -c {output}) > {log} 2>&1")


rule all:
    input:
        [path for spec in SPECS for path in spec.outputs()],


for spec in SPECS:

    rule:
        name:
            spec.module
        input:
            notebook=spec.notebook,
            library=library_inputs(spec.notebook, workflow.basedir),
            reads=spec.inputs(),
        output:
            spec.outputs(),
        log:
            f"artifacts/logs/{spec.id}.log",
        threads: spec.threads
        resources:
            **spec.resources,
        shell:
            RUN_NOTEBOOK


# Sweeps (qkov_tools.sweeps): each sweeps/<name>.yaml is a grid of parameter sets, named by
# Snakemake's Paramspace; one job per set, a papermill run of its figure's notebook into
# artifacts/sweeps/<name>/<set>/, and a gather job that draws the sweep once every set is
# done. They run only when asked for:
#     snakemake --cores 2 sweep_<name>
# (`--config sweeps_dir=DIR` reads the sweep files from DIR instead of sweeps/). A set's
# parameters are its job's `params`: editing the file's base re-runs every set; a new grid
# value is a new set, and only it runs.

import json
import re
from pathlib import Path

from qkov_tools import sweeps

# The commands are constants: a job run by a cluster evaluates its rule's shell command again,
# after this loop, so the command must not name the loop's variable (only params do).
RUN_SET = (f"{sys.executable} -m qkov_tools run {{input.notebook}} --output {{output[1]:q}}"
           " -y {params.values:q} > {log:q} 2>&1")
GATHER = f"{sys.executable} -m qkov_tools.sweeps gather {{params.sweep_file}} > {{log}} 2>&1"

SWEEPS = sweeps.load_all(config.get("sweeps_dir", f"{workflow.basedir}/{sweeps.SWEEPS_DIR}"))

for sweep in SWEEPS:

    rule:
        name:
            sweep.set_rule
        input:
            notebook=sweep.notebook,
            library=library_inputs(sweep.notebook, workflow.basedir),
        output:
            sweep.set_outputs(sweep.pattern),  # summary.json; notebook.ipynb, output[1]
        params:  # the set's parameters (JSON, which YAML reads), its folder absolute
            values=lambda wildcards, sweep=sweep: json.dumps({
                **sweep.values(wildcards.set),
                "artifacts_dir": str(Path(sweep.set_folder(wildcards.set)).resolve())}),
        log:
            sweep.log(sweep.pattern),
        wildcard_constraints:
            set="|".join(map(re.escape, sweep.sets)),
        threads: sweep.threads
        resources:
            **sweep.resources,
        shell:
            RUN_SET

    rule:
        name:
            sweep.rule
        input:
            [path for set_id in sweep.sets for path in sweep.set_outputs(set_id)],
        output:
            sweep.gathered,
        params:  # editing the sets or the plot in the sweep file gathers again
            sweep_file=str(sweep.path),
            sets=list(sweep.sets),
            plot=sweep.plot,
        log:
            f"{sweeps.LOG_DIR}/{sweep.name}/gather.log",
        threads: 1
        shell:
            GATHER


onerror:
    # Which sets failed, with their parameters and logs (the jobs' own lines scroll away).
    sweeps.report_unfinished(SWEEPS)
