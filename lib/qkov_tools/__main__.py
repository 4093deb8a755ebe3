"""The tools' command line (``make figures`` and ``make data`` use it; so may a reader), e.g.
``python -m qkov_tools run notebooks/paper-fig4.ipynb -y "ratios: [1, 10]"``. Sweeps have their
own: ``python -m qkov_tools.sweeps --help``."""

import argparse
import sys
from pathlib import Path

import yaml

from . import data, notebooks

parser = argparse.ArgumentParser("python -m qkov_tools", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
commands = parser.add_subparsers(dest="command", required=True)
run = commands.add_parser("run", help="execute a notebook and store it stripped")
run.add_argument("notebook", type=Path)
run.add_argument("--output", type=Path, help="where to store it (default: in place)")
run.add_argument("-y", "--parameters-yaml", default="{}", help="parameters as YAML")
commands.add_parser("cells", help="generate "
                    "notebooks' install and parameters cells").add_argument("notebooks", nargs="+")
commands.add_parser("data", help="fetch the real data, build the corpora (once)").add_argument(
    "--processes", type=int, default=2, help="parser processes")
args = parser.parse_args()
if args.command == "data":
    sys.exit(data.main(processes=args.processes))
elif args.command == "run":
    notebooks.run(args.notebook, args.output, yaml.safe_load(args.parameters_yaml))
else:
    for path in args.notebooks:
        notebooks.generate_cells(Path(path))
