"""The workbench on a 400 px wide screen (a phone, a narrow side window): every page fits the width, with
no sideways scrolling, and the header keeps the signed-in user's Sign out in view (and no page breaks its
Content-Security-Policy)."""

from __future__ import annotations

import pytest

from tests.browser.conftest import policy_violations, sign_in
from tests.browser.test_workbench import finished_run, task_of
from tests.users import PASSWORD
from verifier.models import Claim

pytestmark = pytest.mark.django_db(transaction=True)
WIDTH = 400
# The outermost elements reaching past the screen's right edge, as "tag.class", to say what to fix.
WIDEST = """[...document.querySelectorAll('main *, header *')]
  .filter(e => !e.closest('nav.primary') && e.getBoundingClientRect().right > window.innerWidth + 1
               && !(e.parentElement && e.parentElement.getBoundingClientRect().right > window.innerWidth + 1))
  .slice(0, 5).map(e => e.tagName.toLowerCase() + (e.className ? '.' + String(e.className).replace(/ /g, '.') : '')
                        + (e.id ? '#' + e.id : ''))"""


def test_every_page_fits_400_px_and_keeps_sign_out_in_view(chromium, server_url, world_kg, make_user):
    make_user("admin", username="ada")
    run = finished_run(task_of(world_kg, "Q42", "P27", "Q145"), make_user("curator", username="cora"))
    claim = Claim.objects.create(kg=world_kg, text="Douglas Adams is a citizen of the United Kingdom.",
                                 status=Claim.Status.DECOMPOSED)
    context = chromium.new_context(base_url=server_url, viewport={"width": WIDTH, "height": 800})
    context.set_default_timeout(15_000)
    violations = policy_violations(context)  # every page keeps its Content-Security-Policy too
    try:
        page = sign_in(context, "ada", PASSWORD)
        pages = ["/", f"/runs/{run.pk}/", f"/tasks/{run.task_id}/", "/import/", "/memory/", "/evaluations/", "/entities/",
                 "/reviewers/", "/confidence/", "/changes/", "/webhooks/", "/audit/", "/health/", "/claims/", f"/claims/{claim.pk}/",
                 "/api/"]  # /api/: DRF's own page, its own header
        problems = {}
        for path in pages:
            page.goto(path)
            page.wait_for_load_state("networkidle")
            width = page.evaluate("document.documentElement.scrollWidth")
            sign_out = page.get_by_role("button", name="Sign out")
            box = sign_out.bounding_box() if sign_out.is_visible() else None
            if width > WIDTH:
                problems[path] = f"{width} px wide (it scrolls sideways); too wide: {page.evaluate(WIDEST)}"
            elif path != "/api/" and (box is None or box["x"] < 0 or box["x"] + box["width"] > WIDTH):
                problems[path] = f"Sign out is out of view ({box})"
        assert not problems, problems
        assert not violations, violations
    finally:
        context.close()


# The navigation links whose label breaks over two lines.
WRAPPED_LINKS = """[...document.querySelectorAll('nav.primary a')].filter(a => {
  const range = document.createRange(); range.selectNodeContents(a); return range.getClientRects().length > 1;
}).map(a => a.textContent.trim())"""


@pytest.mark.parametrize("width", [1024, 1280, 1400, 1440])
def test_an_administrators_top_bar_fits_a_laptop_screen_on_one_line_per_link(chromium, server_url, make_user, width):
    """An administrator has the most links; on a laptop's widths none breaks over two lines, nothing scrolls sideways,
    Sign out stays in view."""
    make_user("admin", username="alexandra")
    context = chromium.new_context(base_url=server_url, viewport={"width": width, "height": 800})
    context.set_default_timeout(15_000)
    try:
        page = sign_in(context, "alexandra", PASSWORD)
        page.goto("/evaluations/")
        page.wait_for_load_state("networkidle")
        page.wait_for_selector("#service-status:not([data-state='unknown'])")
        assert page.evaluate(WRAPPED_LINKS) == []
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        box = page.get_by_role("button", name="Sign out").bounding_box()
        assert box is not None and box["x"] + box["width"] <= width
        status, health = page.locator("#service-status"), page.get_by_role("link", name="Health")
        shown = status.evaluate("e => Math.max(...[...e.children].filter(c => c.getClientRects().length).map(c => {"
                                " const range = document.createRange(); range.selectNodeContents(c);"
                                " const text = range.getBoundingClientRect().right, box = c.getBoundingClientRect().right;"
                                " return getComputedStyle(c).overflow === 'hidden' ? Math.min(text, box) : text; }))")  # as drawn
        assert shown <= health.bounding_box()["x"], "the service status runs into the Health link"
    finally:
        context.close()
