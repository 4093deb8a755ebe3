"""The vocabulary every part of the companion shares: the four parameterizations of an
attention layer and which of its parameters belong to which circuit.

A parameterization names its (attention, output) circuits, each Factorized or Collapsed:
FAFO, FACO, CAFO, CACO. The QK circuit scores keys for a query (``W_QK`` or
``W_Q^T W_K``), the OV circuit maps what attention reads to logits (``W_OV`` or
``W_O W_V``). The theory and the synthetic task's models speak in these terms (the
language decoder, a standard multi-head transformer, names its own ``W_Q``, ``W_K`` in
``qkov.language.train``); this module imports nothing of the companion.
"""

from __future__ import annotations

PARAMETERIZATIONS = ("FAFO", "FACO", "CAFO", "CACO")
QK_PARAMETERS = ("W_QK", "W_Q", "W_K")  # every other weight belongs to the OV circuit


def check_parameterization(name: str) -> str:
    if name not in PARAMETERIZATIONS:
        raise ValueError(
            f"unknown parameterization {name!r}; valid: {', '.join(PARAMETERIZATIONS)}"
        )
    return name


def circuit_kinds(parameterization: str) -> tuple[str, str]:
    """('factorized' | 'collapsed') for the QK and the OV circuit, e.g. FACO: QK factorized."""
    check_parameterization(parameterization)
    kind = {"F": "factorized", "C": "collapsed"}
    return kind[parameterization[0]], kind[parameterization[2]]


def circuit_of(parameter: str) -> str:
    """'qk' or 'ov': the circuit a parameter belongs to, by its name."""
    return "qk" if parameter in QK_PARAMETERS else "ov"


def effective(p: dict) -> tuple:
    """(W_QK, W_OV) of a model's parameters, collapsed or factorized: ``W_QK = W_Q^T W_K``,
    ``W_OV = W_O W_V``. Works on stacked members (leading axes); W_QK is None where the
    model has no QK circuit (fixed attention)."""
    if "W_QK" in p:
        w_qk = p["W_QK"]
    elif "W_Q" in p:
        w_qk = p["W_Q"].transpose(-1, -2) @ p["W_K"]
    else:
        w_qk = None
    w_ov = p["W_OV"] if "W_OV" in p else p["W_O"] @ p["W_V"]
    return w_qk, w_ov
