"""The claims ledger (book/claims.md): every verdict the book states is the one the stored
results give, row by row (tests/test_ledger.py checks that the verdicts follow the numbers)."""

import pytest

from conftest import book_artifacts
from qkov.figures import claims_ledger as L


@pytest.mark.parametrize("claim", L.CLAIMS, ids=lambda claim: claim.id)
def test_each_verdict_is_the_one_the_book_states(claim):
    evidence = claim.evidence(L.Results(book_artifacts()))
    assert evidence.verdict == claim.expected, (
        f"claims ledger, row {claim.id!r}: the stored results give {evidence.verdict!r}, the "
        f"book states {claim.expected!r} ({evidence.text})")
