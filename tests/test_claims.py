"""The claims ledger (book/claims.md): every verdict the book expects is the one the stored
results give, row by row (tests/test_ledger_rules.py checks that each verdict follows the
numbers), and every row is cited by the chapter that states its finding."""

import re
from pathlib import Path

import pytest

from conftest import book_artifacts
from qkov.figures import claims_ledger as L

BOOK = Path(__file__).resolve().parents[1] / "book"
CITATION = re.compile(r"\{qkov-claim\}`([^`]*)`")


@pytest.mark.parametrize("claim", L.CLAIMS, ids=lambda claim: claim.id)
def test_each_verdict_is_the_one_the_book_states(claim):
    evidence = claim.evidence(L.Results(book_artifacts()))
    assert evidence.verdict == claim.expected, (
        f"claims ledger, row {claim.id!r}: the stored results give {evidence.verdict!r}, the "
        f"row expects {claim.expected!r} ({evidence.text})")


def citations() -> dict[str, list[str]]:
    """Each chapter's {qkov-claim} citations (the ledger page's own example left out)."""
    return {page.name: CITATION.findall(page.read_text()) for page in sorted(BOOK.glob("*.md"))
            if page.name != "claims.md"}


def test_every_row_is_cited_and_every_citation_is_a_row():
    rows = {claim.id for claim in L.CLAIMS}
    cited = {claim_id for found in citations().values() for claim_id in found}
    unknown = {page: sorted(set(found) - rows) for page, found in citations().items()
               if set(found) - rows}
    assert not unknown, f"{{qkov-claim}} cites rows the ledger does not have: {unknown}"
    assert not rows - cited, (f"ledger rows no chapter cites (cite each where the book states "
                              f"its finding): {sorted(rows - cited)}")
