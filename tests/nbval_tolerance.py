"""Float32-trained results compared to their printed precision (a pytest plugin on nbval's public
hooks): another processor rounds training differently, so a trained result's last digit can move.
A cell tagged ``nbval-ignore-output`` (nbval runs it, not comparing) and ``nbval-tolerance``
must print and glue the stored text but for numbers within ``RELATIVE`` or ``LAST_DIGITS``
units of their last digit (a half-width after "±": ``HALF_WIDTH_RELATIVE``), the rule
tests/test_perturbation.py shows native and scalar kernels keep."""

import copy
import json
import re
from functools import reduce
from pathlib import Path

import pytest
from nbval.plugin import coalesce_streams, get_sanitize_patterns

TOLERANCE_TAG, IGNORE_TAG = "nbval-tolerance", "nbval-ignore-output"
RELATIVE, LAST_DIGITS, HALF_WIDTH_RELATIVE = 0.005, 3, 0.25
TEXT_KEYS = ("text/plain", "text/html", "text/latex",  # printed or shown (qkov.tables)
             "application/papermill.record/text/plain")  # glued
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")


def _close(stored: str, fresh: str, relative: float) -> bool:
    def last_digit(number: str) -> float:  # "38.33" -> 0.01, "1.3e-05" -> 1e-6
        mantissa, _, exponent = number.lower().partition("e")
        return 10.0 ** (int(exponent or 0) - len(mantissa.partition(".")[2]))

    x, y = float(stored), float(fresh)
    allowed = max(relative * max(abs(x), abs(y)), LAST_DIGITS * max(map(last_digit, (stored, fresh))))
    return abs(x - y) <= allowed * (1 + 1e-9)  # (0.52 - 0.49 is 0.030000000000000027)


def texts_close(stored: str, fresh: str) -> bool:
    """The same text, white space aside (columns widen), every number close to the stored."""
    shape = lambda text: " ".join(NUMBER.sub("#", text).split())  # noqa: E731
    return shape(stored) == shape(fresh) and all(
        _close(a.group(), b.group(), HALF_WIDTH_RELATIVE if stored[:a.start()].rstrip()
               .endswith("±") else RELATIVE)
        for a, b in zip(NUMBER.finditer(stored), NUMBER.finditer(fresh), strict=True))


def _fields(outputs) -> list[tuple[str, str, str]]:
    """(output kind, key, text) of each output, streams joined as nbval joins them, no images."""
    fields = []
    for out in coalesce_streams(copy.deepcopy(outputs)):
        data = {out.name: out.text} if out.output_type == "stream" else out.get("data", {})
        fields += [(out.output_type, key, value if isinstance(value, str) else json.dumps(
            value, sort_keys=True)) for key, value in sorted(data.items())
            if not key.endswith(("png", "jpeg"))]
    return fields


def output_differences(fresh_outputs, stored_outputs, sanitize=(), tolerant=True) -> list[str]:
    """How a cell's fresh outputs differ from the stored (text within the tolerance if ``tolerant``)."""
    clean = lambda text: reduce(lambda t, mask: mask[0].sub(mask[1], t), sanitize, text)  # noqa: E731
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
    return [(re.compile(regex), replacement) for regex, replacement in
            get_sanitize_patterns(Path(path).read_text())] if path else []


def _tags(item) -> list[str]:
    return item.cell.metadata.get("tags", []) if hasattr(item, "cell") else []


def pytest_collection_modifyitems(items):
    for item in items:  # else nbval would compare the cell exactly first
        if TOLERANCE_TAG in _tags(item) and IGNORE_TAG not in _tags(item):
            raise pytest.UsageError(f"{item.nodeid}: a cell tagged {TOLERANCE_TAG} must also "
                                    f"be tagged {IGNORE_TAG}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    if TOLERANCE_TAG in _tags(item) and item.cell.get("execution_count") is not None:
        found = output_differences(item.test_outputs, item.cell.outputs, sanitize_patterns(
            item.config.option.nbval_sanitize_with))
        if found:
            raise AssertionError(f"cell {item.name}: outputs differ beyond the tolerance "
                                 "(tests/nbval_tolerance.py)\n" + "\n".join(found))
    return result
