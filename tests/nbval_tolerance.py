"""Float32-trained results compared to their printed precision: a pytest plugin through
public hooks (pyproject.toml loads it with ``-p nbval_tolerance``).

nbval compares every output of every cell exactly (after tests/nbval-sanitize.cfg, which
also masks the glued figures' PNGs: nbval skips ordinary images, not myst-nb's glued ones,
and what they show is compared as printed numbers). Paper-scale float32 training (Figs. 2
and 3, the ratio sweep) reproduces bit for bit on one machine, but another processor's
kernels round differently, and over hundreds of thousands of steps the last printed digit of
a result can move (seen between two build machines: a held-out loss 0.0009997 vs 0.0009998,
an interval half-width 0.49 vs 0.52).

A cell with such results is tagged ``nbval-ignore-output`` (nbval runs it without comparing)
and ``nbval-tolerance``: after nbval has run it, :func:`pytest_runtest_call` compares its
fresh outputs with the stored ones, and the cell fails unless the text is the same but for
numbers that each lie within ``RELATIVE`` of the stored one or within ``LAST_DIGITS`` units
of its last printed digit; the half-width after a "±" (a spread over a few seeds, itself a
rough estimate) may move by ``HALF_WIDTH_RELATIVE``. Cells without the tag are compared
exactly by nbval: the ODE figures, the parameters, and the language-agreement experiment,
which trains in float64 because its faster-QK conditions amplify float32 rounding far beyond
this tolerance.

tests/test_perturbation.py justifies both rules: it runs each trained figure under the
native kernels and under torch's scalar ones (another rounding of the same computation)
and requires the same agreement between the two runs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

TOLERANCE_TAG = "nbval-tolerance"
IGNORE_TAG = "nbval-ignore-output"  # nbval's own: run, not compared (here: compared below)
RELATIVE = 0.005
LAST_DIGITS = 3
HALF_WIDTH_RELATIVE = 0.25
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


def _joined(text) -> str:
    return "".join(text) if isinstance(text, list) else text


def _fields(outputs) -> list[tuple[str, str, str]]:
    """(output kind, key, value) of every output, consecutive streams of one name joined
    (a cell's prints arrive in pieces); images are left out (a glued figure is compared as
    the numbers printed beside it)."""
    fields: list[tuple[str, str, str]] = []
    for output in outputs:
        kind = output.get("output_type", "")
        if kind == "stream":
            name, text = output.get("name", ""), _joined(output.get("text", ""))
            if fields and fields[-1][:2] == ("stream", name):
                fields[-1] = ("stream", name, fields[-1][2] + text)
            else:
                fields.append(("stream", name, text))
            continue
        if kind == "error":
            fields.append((kind, output.get("ename", ""), output.get("evalue", "")))
        for key, value in sorted(output.get("data", {}).items()):
            if not key.endswith(("image/png", "image/jpeg")):
                fields.append((kind, key, _joined(value) if isinstance(value, str | list)
                               else json.dumps(value, sort_keys=True)))
    return fields


def output_differences(fresh_outputs, stored_outputs, sanitize=(), tolerant=True) -> list[str]:
    """Where a cell's fresh outputs differ from its stored ones, after nbval's ``sanitize``
    patterns: text fields within the tolerance (:func:`texts_close`) where ``tolerant``,
    else exactly, as every other field; [] when they agree."""
    def clean(text: str) -> str:
        for pattern, replacement in sanitize:
            text = pattern.sub(replacement, text)
        return text

    fresh, stored = _fields(fresh_outputs), _fields(stored_outputs)
    if [f[:2] for f in fresh] != [s[:2] for s in stored]:
        return [f"outputs {[f[:2] for f in fresh]} where {[s[:2] for s in stored]} are stored"]
    found = []
    for (kind, key, new), (_, _, old) in zip(fresh, stored, strict=True):
        new, old = clean(new), clean(old)
        text = tolerant and (kind == "stream" or key in TEXT_KEYS)
        if not (texts_close(old, new) if text else old == new):
            found.append(f"{kind} {key} differs{' beyond the tolerance' if text else ''}:\n"
                         f"stored:\n{old}\nfresh:\n{new}")
    return found


def sanitize_patterns(path: str | Path | None) -> list[tuple[re.Pattern, str]]:
    """The (regex, replacement) pairs of an nbval sanitize file (its own format)."""
    if not path:
        return []
    text = Path(path).read_text()
    return [(re.compile(regex), replace) for regex, replace in
            re.findall(r"^regex: (.*)$\n^replace: (.*)$", text, flags=re.MULTILINE)]


def _tags(item) -> list[str]:
    cell = getattr(item, "cell", None)
    return list(cell.metadata.get("tags", [])) if cell is not None else []


def pytest_collection_modifyitems(session, config, items):
    """A cell tagged for tolerance must also be tagged nbval-ignore-output, else nbval
    would compare it exactly first."""
    for item in items:
        tags = _tags(item)
        if TOLERANCE_TAG in tags and IGNORE_TAG not in tags:
            raise pytest.UsageError(
                f"{item.nodeid}: a cell tagged {TOLERANCE_TAG} must also be tagged "
                f"{IGNORE_TAG} (nbval runs it; tests/nbval_tolerance.py compares it)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """After nbval ran a cell tagged for tolerance (and did not compare it), compare its
    fresh outputs with the stored ones within the tolerance."""
    result = yield
    if TOLERANCE_TAG in _tags(item) and item.cell.get("execution_count") is not None:
        fresh = getattr(item, "test_outputs", None)  # what nbval's run of the cell printed
        if fresh is None:
            raise RuntimeError(f"{item.nodeid}: nbval kept no outputs of the cell "
                               "(test_outputs); the tolerance check needs them")
        sanitize = sanitize_patterns(item.config.getoption("nbval_sanitize_with", None))
        found = output_differences(fresh, item.cell.get("outputs", []), sanitize)
        if found:
            raise AssertionError(f"cell {item.name}: outputs differ beyond the tolerance "
                                 f"(tests/nbval_tolerance.py)\n" + "\n".join(found))
    return result
