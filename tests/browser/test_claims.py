"""A curator pastes a claim in plain language and follows it in a real browser: the worker writes it as triples of
the graph (the scripted model), the part's run streams, the claim's verdict appears without a reload; a viewer reads
it without the form; a reviewer's override of the part turns the claim's verdict, and a decision on the whole claim
stands over its parts."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in
from tests.browser.test_workbench import shoot
from tests.users import PASSWORD
from verifier.models import Claim, Run
from verifier.services import review_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_curator_submits_a_claim_and_watches_it_verified(browser_context, world_kg, make_user):
    make_user("curator", username="cora")
    page = sign_in(browser_context, "cora", PASSWORD)
    page.goto("/claims/")
    page.select_option("#claim-form select[name=kg]", label=world_kg.name)
    page.fill("#claim-form textarea[name=claims]", "Douglas Adams was educated at St John's College.")
    page.click("#claim-form button[type=submit]")
    page.wait_for_url("**/claims/*/")
    claim = Claim.objects.get(text="Douglas Adams was educated at St John's College.")
    assert claim.source == "workbench" and claim.created_by.username == "cora"

    # Without a reload: the pseudo-subgraph, the part's run, then the claim's verdict.
    page.wait_for_selector("#claim-parts", timeout=60_000)
    assert "Douglas Adams" in page.inner_text("#claim-parts") and "educated at" in page.inner_text("#claim-parts")
    page.wait_for_selector("#claim-verdict[data-verdict=supported]", timeout=90_000)
    assert "Every part holds as the claim says" in page.inner_text("#claim-justification")
    page.wait_for_selector("#claim-graph canvas", timeout=30_000)  # the pseudo-subgraph drawn
    assert page.is_visible("#claim-graph-card")
    part = claim.parts.get()
    assert (part.head.external_id, part.relation.external_id, part.tail.external_id) == ("Q42", "P69", "Q691283")
    run = Run.objects.get(task=part.task)
    assert run.status == Run.Status.SUCCEEDED and run.created_by.username == "cora"

    # The part's verdict links to its run; overriding it there refutes the claim.
    page.click(f"#claim-parts a[href='/runs/{run.pk}/']")
    page.wait_for_selector("#run-page")
    review_run(run=run, reviewer=make_user("reviewer"), decision="override", reason="he studied elsewhere", verdict="incorrect")
    page.goto(f"/claims/{claim.pk}/")
    assert page.get_attribute("#claim-verdict", "data-verdict") == "refuted"
    page.goto("/claims/")
    assert page.inner_text(f"#claims tr[data-claim='{claim.pk}'] td[data-field=verdict]").strip() == "Refuted"

    # A reviewer decides on the claim as a whole: the override stands over its parts.
    make_user("reviewer", username="rita")
    browser_context.clear_cookies()  # cora signs out
    page = sign_in(browser_context, "rita", PASSWORD)
    page.goto(f"/claims/{claim.pk}/")
    page.fill("#claim-review-reason", "The college's records list him; the KG's source is incomplete.")
    page.click("#claim-override")
    page.wait_for_selector("#claim-verdict[data-verdict=supported]")
    assert "overridden by rita" in page.inner_text("#claim-decided")
    assert "records list him" in page.inner_text("#claim-reviews")
    page.goto(f"/claims/{claim.pk}/")
    page.wait_for_selector("#claim-graph canvas")
    assert page.inner_text("#claim-parts .badge.verdict-incorrect") == "Incorrect"  # the part's standing verdict
    shoot(page, "claim")
    page.click("#claim-queue")  # its parts in the queue
    page.wait_for_selector(f"a.claim-link[data-claim='{claim.pk}']")
    assert page.locator("td.triple").count() == 1


def test_a_viewer_reads_claims_without_the_form_and_a_failed_claim_says_why(browser_context, world_kg, make_user):
    make_user("viewer", username="vic")
    failed = Claim.objects.create(kg=world_kg, text="Nobody can say this.", status=Claim.Status.FAILED,
                                  error="no usable pseudo-subgraph: the reply holds no triple")
    page = sign_in(browser_context, "vic", PASSWORD)
    page.goto("/claims/")
    assert page.locator("#claim-form").count() == 0
    page.goto(f"/claims/{failed.pk}/")
    assert "the reply holds no triple" in page.inner_text("#claim-verdict")
    assert page.locator("#claim-retry").count() == 0  # retrying is a curator's
