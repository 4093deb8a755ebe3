"""qkov: the shared library of the companion to "Faster Query-Key Learning Sharpens
Attention in Self-Attention Models" (Vashisht and Ramaswamy, ICML 2026).

Modules: ``theory`` (reduced dynamics and closed forms), ``figures`` (house style, panels,
saving), ``artifacts`` (output folders, provenance, atomic writes), ``params`` (notebook
parameter checks), ``pipeline`` (executing and storing notebooks).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("qkov")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0+unknown"
