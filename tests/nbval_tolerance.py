"""How nbval compares a re-executed figure notebook with its stored outputs (a pytest
plugin: pyproject.toml loads it with ``-p nbval_tolerance``).

nbval compares every output of every cell exactly (after tests/nbval-sanitize.cfg). Two
kinds of output do not reproduce exactly from one machine to another, and are compared
here as follows (nbval 0.11 is pinned; this wraps its ``IPyNbCell.compare_outputs``):

* A glued figure (myst-nb ``glue``) is stored as a PNG under its own MIME type, which nbval
  does not recognise as an image and compares byte for byte; nbval skips ordinary PNG
  images, and so these are skipped too. What they show is compared as printed numbers.
* Paper-scale float32 training (Figs. 2 and 3, the ratio sweep) reproduces bit for bit on
  one machine, but another processor's kernels round differently, and over hundreds of
  thousands of steps the last printed digit of a result can move (seen between two build
  machines: a held-out loss 0.0009997 vs 0.0009998, an interval half-width 0.49 vs 0.52).
  A cell tagged ``nbval-tolerance`` passes when its text is the same but for numbers that
  each lie within ``RELATIVE`` of the stored one or within ``LAST_DIGITS`` units of its last
  printed digit; the half-width after a "±" (a spread over a few seeds, itself a rough
  estimate) may move by ``HALF_WIDTH_RELATIVE``. Cells without the tag are compared
  exactly: the ODE figures, the parameters, and the language-agreement experiment, which
  trains in float64 because its faster-QK conditions amplify float32 rounding far beyond
  this tolerance.

tests/test_perturbation.py justifies both rules: it runs each trained figure under the
native kernels and under torch's scalar ones (another rounding of the same computation)
and requires the same agreement between the two runs.
"""

from __future__ import annotations

import re

import nbval.plugin

TOLERANCE_TAG = "nbval-tolerance"
RELATIVE = 0.005
LAST_DIGITS = 3
HALF_WIDTH_RELATIVE = 0.25
GLUED_PNG = "application/papermill.record/image/png"
# A result's text, and a value glued (myst-nb) for the book to quote.
TEXT_KEYS = ("text/plain", "application/papermill.record/text/plain")
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")


def _last_digit(number: str) -> float:
    """The value of one unit in the last printed digit: "38.33" -> 0.01, "1.3e-05" -> 1e-6."""
    mantissa, _, exponent = number.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 10.0 ** (int(exponent or 0) - decimals)


def numbers_close(stored: str, fresh: str, relative: float = RELATIVE) -> bool:
    x, y = float(stored), float(fresh)
    allowed = max(relative * max(abs(x), abs(y)),
                  LAST_DIGITS * max(_last_digit(stored), _last_digit(fresh)))
    return abs(x - y) <= allowed * (1 + 1e-9)  # (0.52 - 0.49 is 0.030000000000000027)


def texts_close(stored: str, fresh: str) -> bool:
    """The same text (white space aside: a table's columns widen with a number's digits)
    with every number close to the stored one."""
    shape = lambda text: " ".join(NUMBER.sub("#", text).split())  # noqa: E731
    if shape(stored) != shape(fresh):
        return False
    pairs = zip(NUMBER.finditer(stored), NUMBER.finditer(fresh), strict=True)
    return all(numbers_close(a.group(), b.group(), HALF_WIDTH_RELATIVE
                             if stored[:a.start()].rstrip().endswith("±") else RELATIVE)
               for a, b in pairs)


def _texts(output) -> dict:
    """The text fields of one output, by key: a stream's text, a result's text/plain, a
    glued value's text."""
    if output.get("output_type") == "stream":
        return {"text": output.get("text", "")}
    return {k: v for k, v in output.get("data", {}).items() if k in TEXT_KEYS}


def _within_tolerance(test, ref):
    """``test`` with each text that is close to the stored one replaced by the stored one."""
    if len(test) != len(ref):
        return test
    snapped = []
    for fresh, stored in zip(test, ref):
        fresh = type(fresh)(fresh)  # a copy: nbformat outputs are dict subclasses
        for key, text in _texts(fresh).items():
            stored_text = _texts(stored).get(key)
            as_str = lambda t: "".join(t) if isinstance(t, list) else t  # noqa: E731
            if stored_text is not None and texts_close(as_str(stored_text), as_str(text)):
                if key == "text":
                    fresh["text"] = stored_text
                else:
                    fresh["data"] = {**fresh["data"], key: stored_text}
        snapped.append(fresh)
    return snapped


_compare_exactly = nbval.plugin.IPyNbCell.compare_outputs


def compare_outputs(self, test, ref, skip_compare=None):
    skip_compare = tuple(skip_compare or self.parent.skip_compare) + (GLUED_PNG,)
    if TOLERANCE_TAG in self.cell.metadata.get("tags", []):
        test = _within_tolerance(test, ref)
    return _compare_exactly(self, test, ref, skip_compare)


nbval.plugin.IPyNbCell.compare_outputs = compare_outputs
