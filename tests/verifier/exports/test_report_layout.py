"""The PDF evidence report keeps every character of the HTML report on the page.

The PDF is read back twice, as an auditor would meet it: its characters with their positions (pdfplumber)
and its pages rendered to images (pdfium). A report with the cells that broke the layout before — a step of
several thousand characters, lines of unbroken ids and URLs, symbols outside Latin-1 — must come out with
the same characters as the HTML report, none outside the text area, none printed over another, and a
header and a numbered footer on every page.
"""

import html
import io
import re
from collections import Counter
from itertools import groupby

import pdfplumber
import pypdfium2
import pytest
from django.utils.html import strip_tags

from tests.verifier.exports.verified_runs import add_review, content_hash, make_finished_run, make_task
from verifier import exports
from verifier.exports.records import select
from verifier.exports.report import to_html
from verifier.models import Step, SupportItem

pytestmark = pytest.mark.django_db

CM = 72 / 2.54  # PDF points per centimetre
MARGIN_X, BODY_TOP, BODY_BOTTOM = 1.4 * CM, 2.0 * CM, 1.8 * CM  # the @page margins of report.html
URL = "https://en.wikipedia.org/wiki/Special:Search?search=" + "Douglas_Adams_" * 12 + "&fulltext=1"
PATH = "/award/award_category/winners./award/award_honor/award_winner" * 3
RULE = "(?x) -[place of birth]-> (?z) -[country]-> (?y) ⇒ (?x) -[country of citizenship]-> (?y) — confidence ≤ 0.93 → Zürich"


@pytest.fixture
def long_run(verified):
    run = verified["run"]
    sentences = " ".join(f"Sentence {i} of a long passage about Douglas Adams, written in Cambridge." for i in range(90))
    observation = "\n".join([f"[E4] {RULE}", f"[E5] {PATH}", f"[E6] read from {URL}", sentences])
    step = Step.objects.create(run=run, seq=6, kind="observation", content=observation)
    for key, text, source in (("E4", RULE, "local:world#1"), ("E5", f"{PATH} {PATH}", URL), ("E6", sentences, URL)):
        SupportItem.objects.create(run=run, step=step, key=key, kind="rule", text=text, source=source, cited=key != "E6",
                                   content_hash=content_hash("rule", text, source))
    run.explanation = f"{run.explanation} The rule {RULE} holds along {PATH}."
    run.save(update_fields=["explanation"])
    return run


def _body_characters(page) -> list[dict]:
    body = page.crop((0, BODY_TOP - 2, page.width, page.height - BODY_BOTTOM + 2))
    return [c for c in body.chars if not c["text"].isspace()]


def _overprinted(chars: list[dict]) -> list[tuple[str, str]]:
    """Pairs of characters whose boxes overlap by more than half the smaller one (text printed over text)."""
    cells: dict[tuple[int, int], list[dict]] = {}
    for c in chars:
        cells.setdefault((int(c["x0"] // 20), int(c["top"] // 20)), []).append(c)
    found = []
    for (cx, cy), members in cells.items():
        nearby = [o for dx in (-1, 0, 1) for dy in (-1, 0, 1) for o in cells.get((cx + dx, cy + dy), [])]
        for a in members:
            for b in nearby:
                if a is b or id(a) > id(b):
                    continue
                width = min(a["x1"], b["x1"]) - max(a["x0"], b["x0"])
                height = min(a["bottom"], b["bottom"]) - max(a["top"], b["top"])
                smaller = min((a["x1"] - a["x0"]) * (a["bottom"] - a["top"]), (b["x1"] - b["x0"]) * (b["bottom"] - b["top"]))
                if width > 0 and height > 0 and width * height > 0.5 * smaller:
                    found.append((a["text"], b["text"]))
    return found


def _repeated_headers(body_html: str) -> list[Counter]:
    rows = re.findall(r'<table repeat="1">\s*<tr>(.*?)</tr>', body_html, flags=re.S)
    return [Counter(c for c in html.unescape(strip_tags(row)) if not c.isspace()) for row in rows]


@pytest.mark.slow
def test_the_pdf_report_keeps_every_character_inside_the_page_and_numbers_its_pages(long_run):
    selection = select(run_ids=[long_run.pk])
    pdf = exports.render(selection, "pdf").content
    body_html = to_html(selection).split("<body>", 1)[1]
    body_html = re.sub(r'<div id="page-(header|footer)".*?</div>', "", body_html, flags=re.S)
    expected = Counter(c for c in html.unescape(strip_tags(body_html)) if not c.isspace())

    printed: Counter = Counter()
    with pdfplumber.open(io.BytesIO(pdf)) as document:
        pages = document.pages
        assert len(pages) >= 3  # the long step runs over pages instead of off one
        for number, page in enumerate(pages, start=1):
            chars = _body_characters(page)
            printed.update(c["text"] for c in chars)
            outside = [c["text"] for c in chars if c["x0"] < MARGIN_X - 1 or c["x1"] > page.width - MARGIN_X + 1]
            assert not outside, f"page {number}: {len(outside)} characters outside the text area"
            assert not _overprinted(chars), f"page {number}: text printed over text"
            header = page.crop((0, 0, page.width, BODY_TOP - 2)).extract_text()
            footer = page.crop((0, page.height - BODY_BOTTOM + 2, page.width, page.height)).extract_text()
            assert header.startswith("KGV evidence report")
            assert f"page {number} of {len(pages)}" in footer
    missing, extra = expected - printed, printed - expected
    for header in _repeated_headers(body_html):  # a table running over pages repeats its header row there
        while header and not header - extra:
            extra -= header
    assert not missing and not extra, f"lost: {dict(missing)}; not in the HTML report: {dict(extra)}"

    # Rendered, as it prints: ink in the text area, none in the side margins (nothing runs off the page).
    for number, page in enumerate(pypdfium2.PdfDocument(pdf), start=1):
        image = page.render(scale=1).to_pil().convert("L")
        width, height = image.size
        margin = int(MARGIN_X * width / page.get_width()) - 2
        for box in ((0, 0, margin, height), (width - margin, 0, width, height)):
            assert image.crop(box).getextrema()[0] > 200, f"page {number}: ink in a side margin"
        assert image.crop((margin, margin, width - margin, height - margin)).getextrema()[0] < 160


def test_report_text_marks_long_tokens_breakable_and_keeps_lines_and_escaping():
    from verifier.templatetags.kgv import report_text

    rendered = report_text(f"<b>x</b> words\nsecond line {PATH[:40]}")
    assert rendered.startswith("&lt;b&gt;x&lt;/b&gt; words<br>second line ")
    assert rendered.endswith(f'<span class="long">{PATH[:40]}</span>')
    assert report_text(None) == ""


# ---- a report of several runs opens with its summary -----------------------------------------------------------

TRIPLES = [("Q42", "P19", "Q350"), ("Q42", "P69", "Q691283"), ("Q42", "P800", "Q3107329"), ("Q350", "P17", "Q145"),
           ("Q691283", "P131", "Q350"), ("Q90", "P17", "Q142"), ("Q145", "P47", "Q142")]


@pytest.fixture
def eight_runs(verified):
    """The verified run (accepted) and seven more: overridden, not reviewed, merely commented, judged without enough
    evidence, and two reviewers disagreeing."""
    runs = [verified["run"]]
    for position, (head, relation, tail) in enumerate(TRIPLES):
        runs.append(make_finished_run(make_task(verified["kg"], head, relation, tail), confidence=0.5 + position / 20,
                                      verdict="incorrect" if position % 2 else "correct"))
    reviewer, second = verified["reviewer"], verified["curator"]
    add_review(runs[1], reviewer, decision="override", verdict="incorrect", reason="Born in Cambridge, but not that one.")
    add_review(runs[3], reviewer, decision="comment", reason="Ask the editor.")
    add_review(runs[4], reviewer, decision="not_enough_evidence", verdict="not_enough_evidence", reason="No source.")
    add_review(runs[5], reviewer, decision="accept")
    add_review(runs[5], second, decision="override", verdict="incorrect", reason="The college is elsewhere.")
    return runs



def _heading_page(document, record) -> int:
    """The index of the page whose body opens with the run's heading."""
    heading = f"({record.head.label}, {record.relation.label}, {record.tail.label})"
    pages = [i for i, page in enumerate(document.pages)
             if " ".join(page.crop((0, BODY_TOP - 2, page.width, BODY_TOP + 20)).extract_text().split()) == heading]
    assert len(pages) == 1, f"{heading} opens {len(pages)} pages"
    return pages[0]


@pytest.mark.slow
def test_a_report_of_several_runs_opens_with_a_summary_linking_each_run_to_its_own_page(eight_runs):
    selection = select(run_ids=[run.pk for run in eight_runs])
    pdf = exports.render(selection, "pdf").content
    with pdfplumber.open(io.BytesIO(pdf)) as document:
        first = document.pages[0]
        title = next(word for word in first.extract_words() if word["top"] > BODY_TOP - 2)
        assert title["text"] == "KGV" and title["top"] < BODY_TOP + 6  # the report starts at the top of page 1
        (summary,) = first.extract_tables()
        rows = [[" ".join(cell.split()) for cell in row] for row in summary]
        assert rows[0] == ["#", "Triple", "Verdict", "Confidence", "Review (latest decision)"]
        assert rows[1:] == [
            [str(n), f"({r.head.label}, {r.relation.label}, {r.tail.label})", r.verdict, f"{r.confidence:.2f}", review]
            for n, (r, review) in enumerate(zip(selection.records, [
                "accepted by rene", "overridden to incorrect by rene", "not reviewed", "not reviewed",
                "not enough evidence by rene", "overridden to incorrect by carla (reviewers disagree)", "not reviewed",
                "not reviewed"], strict=True), start=1)]
        assert [r.run_id for r in selection.records] == [run.pk for run in eight_runs]  # in the order asked

        # Each run's detail opens a page of its own after the summary, in order, and its summary line links there.
        pages = [_heading_page(document, record) for record in selection.records]
        assert pages == sorted(pages) and pages[0] == 1
        page_ids = [page.page_obj.pageid for page in document.pages]
        links = sorted((a for a in first.annots if a["data"].get("Dest")), key=lambda a: a["top"])
        targets = [page_ids.index(link["data"]["Dest"][0].objid) for link in links]
        assert [page for page, _ in groupby(targets)] == pages  # a line that wraps is one link per printed line


def test_a_report_of_one_run_has_its_summary_line_and_its_detail_on_the_first_page(verified):
    pdf = exports.render(select(run_ids=[verified["run"].pk]), "pdf").content
    with pdfplumber.open(io.BytesIO(pdf)) as document:
        first = document.pages[0]
        summary = first.extract_tables()[0]
        assert [" ".join(cell.split()) for cell in summary[1]] == [
            "1", "(Douglas Adams, country of citizenship, United Kingdom)", "correct", "0.90", "accepted by rene"]
        assert "Cited evidence" in first.extract_text()  # no page left half blank before the detail
