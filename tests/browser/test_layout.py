"""Every page a curator works in, at 400 px (a phone, a narrow side window) and at 1,280 px (a laptop), with the longest
labels of the shipped data: nothing scrolls the page sideways, and no word is broken inside itself ("Pa ul M cC art ney").
A token too long for any line (an id path, a URL) may break where it must, or be shortened with its whole text in a
title. Each page is photographed at both widths (into KGV_SCREENSHOTS when set, else the test's folder)."""

from __future__ import annotations

import json

import pytest

from tests.browser.conftest import policy_violations, sign_in
from tests.browser.test_workbench import SCREENSHOTS, finished_run
from tests.users import PASSWORD
from tests.verifier.kg_audit.test_audit import noisy  # noqa: F401  (fixture)
from tests.workers import wait_for
from verifier.claims.pipeline import queue_claim, submit_claim
from verifier.kg_audit.pipeline import run_here, start_audit
from verifier.models import Claim, Entity, Relation, Run, Suspect, VerificationTask

pytestmark = pytest.mark.django_db(transaction=True)

WIDTHS = (400, 1280)
# The longest labels of the shipped data: CoDEx-S's longest entity, FB15k-237's longest entity and relation (the
# relation's id is a path of 146 characters without a space), and a name of the kind the issue saw broken.
LONG_ENTITY = "Agency for the Prohibition of Nuclear Weapons in Latin America and the Caribbean"
LONGEST_ENTITY = ("Primetime Emmy Award for Outstanding Continued Performance by an Actress in a Leading Role in a "
                  "Dramatic Series")
LONG_RELATION_ID = ("/base/x2010fifaworldcupsouthafrica/world_cup_squad/current_world_cup_squad./base/"
                    "x2010fifaworldcupsouthafrica/current_world_cup_squad/current_club")
LONG_RELATION = ("base x2010fifaworldcupsouthafrica world cup squad current world cup squad. base "
                 "x2010fifaworldcupsouthafrica current world cup squad current club")
MAX_TOKEN = 30  # a token longer than this (an id path, a URL, a hash) may break; a word within a shorter one may not

# Words (runs of two or more letters, in tokens of at most MAX_TOKEN characters) drawn over more than one line.
BROKEN_WORDS = """(maxToken) => {
  const broken = [];
  const range = document.createRange();
  for (const root of document.querySelectorAll('header.topbar, main')) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode;
      const parent = node.parentElement;
      if (!parent || !parent.getClientRects().length || parent.closest('script, style, select, option, textarea')) continue;
      for (const token of node.textContent.matchAll(/\\S+/g)) {
        if (token[0].length > maxToken) continue;
        for (const word of token[0].matchAll(/\\p{L}{2,}/gu)) {
          const start = token.index + word.index;
          range.setStart(node, start);
          range.setEnd(node, start + word[0].length);
          const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
          if (tops.size > 1) broken.push(`${word[0]} (in ${parent.tagName.toLowerCase()}.${parent.className})`);
        }
      }
    }
  }
  return broken.slice(0, 8);
}"""
# The outermost elements reaching past the screen's right edge, to say what to fix.
WIDEST = """() => [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1
               && !(e.parentElement && e.parentElement.getBoundingClientRect().right > window.innerWidth + 1))
  .slice(0, 5).map(e => e.tagName.toLowerCase() + (e.className ? '.' + String(e.className).replace(/ /g, '.') : '')
                        + (e.id ? '#' + e.id : ''))"""


@pytest.fixture
def long_labels(world_kg):
    """The world KG with the longest labels of the data, and a flagged triple made of them."""
    kg = world_kg
    emmy = Entity.objects.create(kg=kg, external_id="/m/0fbtbt", label=LONGEST_ENTITY)
    agency = Entity.objects.create(kg=kg, external_id="Q1139380", label=LONG_ENTITY)
    paul = Entity.objects.create(kg=kg, external_id="Q2599", label="Paul McCartney")
    squad = Relation.objects.create(kg=kg, external_id=LONG_RELATION_ID, label=LONG_RELATION)
    member = Relation.objects.get(kg=kg, external_id="P27")
    tasks = [VerificationTask.objects.create(kg=kg, head=paul, relation=squad, tail=emmy, source="flagged-from-the-extractor.csv:2"),
             VerificationTask.objects.create(kg=kg, head=agency, relation=member, tail=emmy)]
    return kg, tasks


def _audited(kg) -> int:
    """A finished audit of the noisy KG whose top suspects carry the longest labels."""
    audit = run_here(start_audit(kg=kg, queue=False))
    top = Suspect.objects.filter(audit=audit).order_by("rank").select_related("head", "tail", "relation")[:2]
    for suspect in top:
        Entity.objects.filter(pk=suspect.head_id).update(label=LONGEST_ENTITY)
        Entity.objects.filter(pk=suspect.tail_id).update(label=LONG_ENTITY)
        Relation.objects.filter(pk=suspect.relation_id).update(label=LONG_RELATION)
    return audit.pk


def test_the_work_pages_fit_400_and_1280_px_with_the_longest_labels_without_breaking_a_word(
        chromium, server_url, long_labels, noisy, make_user, tmp_path):  # noqa: F811
    kg, tasks = long_labels
    make_user("admin", username="ada")  # an administrator: the most links, every form
    run = finished_run(tasks[0], make_user("curator", username="cora"))
    claim = submit_claim(kg=kg, text=f"Paul McCartney received the {LONGEST_ENTITY}.", source="workbench")
    queue_claim(claim)
    wait_for(lambda: Claim.objects.get(pk=claim.pk).status != Claim.Status.PENDING, 90, "the claim's parts")
    wait_for(lambda: not Run.objects.in_flight().exists(), 90, "the parts' runs")
    audit_id = _audited(noisy)
    flagged = tmp_path / "flagged.csv"
    flagged.write_text(f"head,relation,tail\nPaul McCartney,{LONG_RELATION_ID},{LONG_ENTITY}\n", encoding="utf-8")
    folder = SCREENSHOTS or tmp_path / "layout"
    folder.mkdir(parents=True, exist_ok=True)

    pages = {"queue": "/?per_page=25", "run": f"/runs/{run.pk}/", "claim": f"/claims/{claim.pk}/", "import": "/import/",
             "kg-audits": "/kg-audits/", "kg-audit": f"/kg-audits/{audit_id}/", "guide": "/guide/"}
    problems = {}
    for width in WIDTHS:
        context = chromium.new_context(base_url=server_url, viewport={"width": width, "height": 900})
        context.set_default_timeout(15_000)
        violations = policy_violations(context)
        try:
            page = sign_in(context, "ada", PASSWORD)
            for name, path in pages.items():
                page.goto(path)
                page.wait_for_load_state("networkidle")
                if name == "queue":
                    page.click("#more-filters summary")  # every filter in view: the relation's select among them
                if name == "import":  # the preview's table of the file's triples, as the KG names them
                    page.select_option("select[name=kg]", label=kg.name)
                    page.set_input_files("input[name=file]", str(flagged))
                    page.click("#preview-button")
                    page.wait_for_selector("#import-preview")
                _check(page, width, f"{name} at {width} px", problems)
                page.screenshot(path=str(folder / f"layout-{width}-{name}.png"), full_page=True)
            assert not violations, violations
        finally:
            context.close()
    assert not problems, json.dumps(problems, indent=1)


def _check(page, width: int, what: str, problems: dict) -> None:
    scrolled = page.evaluate("document.documentElement.scrollWidth")
    if scrolled > width:
        problems[what] = f"{scrolled} px wide (the page scrolls sideways): {page.evaluate(WIDEST)}"
    broken = page.evaluate(BROKEN_WORDS, MAX_TOKEN)
    if broken:
        problems[f"{what}: broken words"] = broken
    primary = page.locator("nav.primary a").all()
    cut = [link.inner_text() for link in primary if (box := link.bounding_box()) and box["x"] + box["width"] > width + 1]
    if cut:
        problems[f"{what}: navigation cut"] = cut
