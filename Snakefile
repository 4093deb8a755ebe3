# `snakemake --cores 2` (`make figures`): a rule per figure spec (none for one that needs a
# dataset) runs its notebook in place, again when it, a file it reads or a library module it
# imports changes. Sweeps (qkov_tools.sweeps) run when asked for.

import json
import sys
from pathlib import Path

from qkov.artifacts import PIPELINE_ENV
from qkov.figures import specs
from qkov_tools import sweeps
from qkov_tools.imports import library_inputs

PY = sys.executable  # the jobs use the environment Snakemake runs in, activated or not
FIGURES = [spec for spec in specs().values() if not spec.needs_dataset]


rule all:
    input: [path for spec in FIGURES for path in spec.outputs()]


for spec in FIGURES:
    rule:
        name: spec.module
        input:
            notebook=spec.notebook, reads=spec.inputs(),
            library=library_inputs(spec.notebook, workflow.basedir)
        output: spec.outputs()
        log: f"artifacts/logs/{spec.id}.log"
        threads: spec.threads
        resources: **spec.resources
        # touch -c: the outputs end newer than the stored notebook; a missing one fails the rule
        shell:
            f"({PIPELINE_ENV}=1 {PY} -m qkov_tools run {{input.notebook}}"
            " && touch -c {output}) > {log} 2>&1"


SWEEPS = [sweeps.load(path) for path in
          sorted(Path(config.get("sweeps_dir", f"{workflow.basedir}/sweeps")).glob("*.yaml"))]

for sweep in SWEEPS:
    rule:  # a set: its parameters are params, so editing them re-runs it
        name: sweep.rule + "_set"
        input: notebook=sweep.notebook, library=library_inputs(sweep.notebook, workflow.basedir)
        output: sweep.outputs("{set}")
        params:
            values=lambda w, sweep=sweep: json.dumps(
                {**sweep.values(w.set), "artifacts_dir": str(Path(sweep.folder, w.set).resolve())})
        log: sweep.log("{set}")
        threads: sweep.threads
        resources: **sweep.resources
        shell:
            f"{PY} -m qkov_tools run {{input.notebook}} --output {{output[1]:q}}"
            " -y {params.values:q} > {log:q} 2>&1"

    rule:  # the gather, once every set is done; editing the sets or the plot gathers again
        name: sweep.rule
        input: [path for set_id in sweep.sets for path in sweep.outputs(set_id)]
        output: sweep.gathered
        params: sweep=str(sweep.path), sets=list(sweep.sets), plot=sweep.plot
        run: sweeps.gather(sweeps.load(params.sweep))  # (`sweep` here would be the loop's last)


onerror:
    # Each started sweep's sets not done, with their logs (the jobs' lines scroll away)
    for sweep in SWEEPS:
        report, done = sweeps.status(sweep)
        if not done and sweep.folder.exists():
            print(report, file=sys.stderr)
