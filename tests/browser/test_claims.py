"""A curator pastes a claim in plain language and follows it in a real browser: the worker writes it as triples of
the graph (the scripted model, as over-eager as the embedded 1.5B model: it adds triples the claim does not state),
only the triples the claim states become parts, each part's run streams, the claim's verdict appears without a
reload once every part is settled; a denial is verified as the claim states it; text that is no claim is refused; a
viewer reads claims without the form; a reviewer's override of the part turns the claim's verdict, and a decision on
the whole claim stands over its parts."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in
from tests.browser.test_workbench import shoot
from tests.users import PASSWORD
from verifier.models import Claim, Run, VerificationTask
from verifier.services import review_run

pytestmark = pytest.mark.django_db(transaction=True)


def _submit(page, kg, text: str) -> Claim:
    page.goto("/claims/")
    page.select_option("#claim-form select[name=kg]", label=kg.name)
    page.fill("#claim-form textarea[name=claims]", text)
    page.click("#claim-form button[type=submit]")
    page.wait_for_url("**/claims/*/")
    return Claim.objects.get(text=text)


def _parts(claim: Claim) -> list[tuple[str, str, str, bool]]:
    return [(p.head.external_id, p.relation.external_id, p.tail.external_id, p.negated)
            for p in claim.parts.select_related("head", "relation", "tail")]


def test_a_claim_is_its_one_stated_triple_and_its_verdict_waits_for_that_part(browser_context, claims_kg, make_user,
                                                                               scripted_model):
    make_user("curator", username="cora")
    page = sign_in(browser_context, "cora", PASSWORD)
    held = "Douglas Adams — place of birth — Cambridge"
    scripted_model.investigator.hold(held)  # the part's run stays in flight until released
    try:
        claim = _submit(page, claims_kg, "Douglas Adams was born in Cambridge.")
        page.wait_for_selector("#claim-parts td a:has-text('running')", timeout=150_000)  # after its KG's model
        # The model also wrote "Douglas Adams || country of origin || unknown_1": left out, never resolved nor run.
        assert page.locator("#claim-parts tbody tr").count() == 1
        assert "Douglas Adams || country of origin || unknown_1 — the claim does not say 'country of origin'" in \
            page.inner_text("#claim-left-out")
        assert _parts(claim) == [("Q42", "P19", "Q350", False)] and claim.resolution == {}
        assert VerificationTask.objects.filter(kg=claims_kg).count() == 1
        # Its one part is in flight: the claim has no verdict yet, whatever else the model wrote.
        assert page.get_attribute("#claim-verdict", "data-verdict") == "open"
        assert "Not every part has a verdict yet" in page.inner_text("#claim-justification")
        assert not Run.objects.get(task=claim.parts.get().task).is_finished
    finally:
        scripted_model.investigator.release(held)
    page.wait_for_selector("#claim-verdict[data-verdict=supported]", timeout=60_000)
    assert page.inner_text("#claim-justification").startswith(
        "Every part holds as the claim says: Douglas Adams || place of birth || Cambridge: Correct")


def test_a_denial_is_verified_as_the_claim_states_it_and_text_that_is_no_claim_is_refused(browser_context, claims_kg,
                                                                                          make_user, scripted_model):
    make_user("curator", username="cora")
    page = sign_in(browser_context, "cora", PASSWORD)
    claim = _submit(page, claims_kg, "Paul McCartney is not a singer.")
    page.wait_for_selector("#claim-verdict[data-verdict=refuted]", timeout=150_000)  # he is one: the run says Correct
    # Written as "NOT … member of sports team || singer" and "… member of political party || American Academy …":
    # the first is read with the relation the claim states, the second left out.
    assert _parts(claim) == [("Q2599", "P106", "Q177220", True)]
    row = page.inner_text("#claim-parts tbody tr")
    assert "Paul McCartney" in row and "not occupation" in row and "singer" in row
    left_out = page.inner_text("#claim-left-out")
    assert "read as Paul McCartney || occupation || singer" in left_out
    assert "'American Academy of Arts and Sciences' is not named in the claim" in left_out
    assert page.inner_text("#claim-justification").startswith(
        "A part does not hold as the claim says: NOT Paul McCartney || occupation || singer: Correct")

    asked = len(scripted_model.requests)
    refused = _submit(page, claims_kg, "x")
    page.wait_for_selector("#claim-verdict[data-status=refused]", timeout=30_000)
    assert page.inner_text("#claim-refusal").startswith("Not a claim: a claim is a sentence stating something")
    assert page.locator("#claim-parts").count() == 0 and not refused.parts.exists()
    assert not any("Claim: x" in r.prompt for r in scripted_model.requests[asked:])  # refused before the model is asked
    page.goto("/claims/")
    assert page.inner_text(f"#claims tr[data-claim='{refused.pk}'] td[data-field=verdict]").strip() == "Refused"


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
