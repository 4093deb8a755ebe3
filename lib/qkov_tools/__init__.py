"""qkov_tools: the build tooling around the science package ``qkov`` (the ``tools`` extra):
running and storing notebooks, the notebooks' library inputs, sweeps, fetching the real data.
Its command line: ``python -m qkov_tools --help``."""
