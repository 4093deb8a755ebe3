"""The claims ledger (book/claims.md): every verdict the book expects is the one the stored
results give, row by row (tests/test_ledger_rules.py checks that each verdict follows the
numbers), and every row is cited by the chapter that states its finding."""

import sys
from pathlib import Path

import pytest

from conftest import book_artifacts
from qkov.figures import claims_ledger as L

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "book" / "_ext"))  # the book's extensions, as _config.yml loads them
from qkov_ledger import citing_pages  # noqa: E402  (the ledger page lists the same citations)


@pytest.mark.parametrize("claim", L.CLAIMS, ids=lambda claim: claim.id)
def test_each_verdict_is_the_one_the_book_states(claim):
    evidence = claim.evidence(L.Results(book_artifacts()))
    assert evidence.verdict == claim.expected, (
        f"claims ledger, row {claim.id!r}: the stored results give {evidence.verdict!r}, the "
        f"row expects {claim.expected!r} ({evidence.text})")


def test_every_row_is_cited_and_every_citation_is_a_row():
    """Each chapter's {qkov-claim} citations (the ledger page's own example left out)."""
    rows = {claim.id for claim in L.CLAIMS}
    cited = citing_pages(REPO)
    unknown = {claim_id: [page.name for page in pages] for claim_id, pages in cited.items()
               if claim_id not in rows}
    assert not unknown, f"{{qkov-claim}} cites rows the ledger does not have: {unknown}"
    assert not rows - set(cited), (f"ledger rows no chapter cites (cite each where the book states "
                              f"its finding): {sorted(rows - set(cited))}")
