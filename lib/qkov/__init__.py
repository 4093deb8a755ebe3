"""qkov: the shared library of the companion to "Faster Query-Key Learning Sharpens
Attention in Self-Attention Models" (Vashisht and Ramaswamy, ICML 2026).

Modules by layer, lowest first (a module imports only from layers below its own; the test
suite checks it):

- ``circuits`` (the four parameterizations, which parameters are QK or OV), ``seeding``
  (every random generator), ``params`` (notebook parameters: checks, typed figure
  parameters), ``processes`` (runs spread over worker processes), ``artifacts`` (output
  folders, provenance, atomic writes);
- ``theory.reduced`` (the reduced dynamics, closed forms), ``synthetic.tasks`` (the
  synthetic task's data), ``plotting`` (house style, drawing, saving a figure's files);
- ``theory.stylized`` (full matrices whose gradient flow is the reduced dynamics),
  ``synthetic.models`` (the task's one-layer attention models and their ensembles);
- ``synthetic.train`` (training many models as one batched computation),
  ``synthetic.metrics``;
- ``figures.<figure_id>``: one module per figure of the book (``figures.paper_fig2``, ...);
- ``book`` (the book's Sphinx extension), ``pipeline`` (the figure registry, executing and
  storing notebooks).

The language experiments will get packages of their own beside ``synthetic`` (their data,
models and training) and a model-agnostic ``attribution`` below them.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("qkov")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0+unknown"
