"""qkov: the shared library of the companion to "Faster Query-Key Learning Sharpens
Attention in Self-Attention Models" (Vashisht and Ramaswamy, ICML 2026).

Modules by layer, lowest first (a module imports only from layers below its own; the test
suite checks it):

- ``circuits`` (the four parameterizations, which parameters are QK or OV), ``seeding``
  (every random generator), ``params`` (notebook parameter checks), ``processes`` (runs
  spread over worker processes), ``artifacts`` (output folders, provenance, atomic writes);
- ``theory`` (reduced dynamics, closed forms), ``tasks`` (the synthetic task's data);
- ``stylized`` (full matrices whose gradient flow is the reduced dynamics), ``models``
  (the task's one-layer attention models and their ensembles);
- ``train`` (training many models as one batched computation), ``metrics``;
- ``paper`` (paper Figs. 2 and 3), ``theory_runs`` (the theory chapter's figures);
- ``figures`` (house style, panels, saving), ``book`` (the book's Sphinx extension),
  ``pipeline`` (executing and storing notebooks).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("qkov")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0+unknown"
