# Regenerates every figure: one rule per figure of the registry qkov.pipeline.FIGURE_JOBS.
# Run locally with
#     snakemake --cores 2
# (`make figures` does this inside the project's virtual environment).
#
# Each rule executes its notebook with papermill at the default (paper-scale) parameters
# and stores it in place, stripped of timestamps: the stored outputs are the latest run.
# A rule's inputs are its notebook, the files of other figures it reads, and the library
# modules the notebook imports, directly or through other modules
# (qkov.pipeline.library_inputs): editing lib/qkov re-runs the figures that use what was
# edited, and only those; a run with nothing changed does nothing. Training rules take
# both cores (each trains in two processes), so they run one after the other rather than
# competing for the cores.

import sys

from qkov import pipeline

# The notebook is rewritten in place by the run; touching the outputs afterwards keeps them
# newer than it, so the next run sees nothing to do. sys.executable: the jobs use the
# environment Snakemake runs in, activated or not.
RUN_NOTEBOOK = (f"({sys.executable} -m qkov.pipeline run {{input.notebook}} && touch {{output}})"
                " > {log} 2>&1")


rule all:
    input:
        [path for job in pipeline.FIGURE_JOBS for path in job.outputs],


for job in pipeline.FIGURE_JOBS:

    rule:
        name:
            job.rule
        input:
            notebook=job.notebook,
            library=pipeline.library_inputs(job.notebook, workflow.basedir),
            reads=job.reads,
        output:
            job.outputs,
        log:
            f"artifacts/logs/{job.figure_id}.log",
        threads: job.threads
        shell:
            RUN_NOTEBOOK
