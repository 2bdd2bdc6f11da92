"""Pages under their Content-Security-Policy in a real browser: scripts come only from KGV's files, so what used to be
inline still works from there — the KG changes page asks before it applies, the API docs start Swagger UI — and the
browser reports no violation (browser_context fails a test on any)."""

from __future__ import annotations

import pytest

from tests.browser.conftest import sign_in
from tests.users import PASSWORD
from tests.verifier.exports.test_changes import decided  # noqa: F401  (fixture)
from tests.verifier.exports.verified_runs import light_kg, verified  # noqa: F401  (fixtures)
from verifier.models import Triple

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_changes_page_asks_before_applying_and_the_api_docs_start_under_the_policy(browser_context, decided,  # noqa: F811
                                                                                       make_user):
    make_user("admin", username="adele")
    page = sign_in(browser_context, "adele", PASSWORD)
    answer = page.goto("/changes/")
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]

    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))  # the admin thinks again
    page.get_by_role("button", name="Apply to KGV's copy of world").click()
    assert asked and asked[0].startswith("Change KGV's copy of world: remove and add these triples")
    page.wait_for_timeout(300)
    assert page.url.endswith("/changes/")  # nothing was sent
    assert Triple.objects.filter(kg=decided["kg"], head__external_id="Q42", relation__external_id="P19",
                                 tail__external_id="Q350").exists()

    page.goto("/api/docs/")
    page.wait_for_selector(".swagger-ui .opblock-tag", timeout=20_000)  # Swagger UI's script ran from its own file
    assert page.locator(".swagger-ui .opblock").count() > 10
