"""Words for curators: the guide and its glossary, the first steps a new installation's queue shows, the filters a
newcomer meets first, evidence sources named as a curator reads them, command lines only where administrators are."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.verifier.web.run_pages import make_finished_run, make_world
from tests.verifier.web.workbench import client_for, fast_password_hashing  # noqa: F401  (autouse fixture)
from verifier.models import SupportItem
from verifier.templatetags.kgv import source_label, url_label

pytestmark = pytest.mark.django_db


def test_the_guide_gives_the_four_steps_and_the_words_that_must_stay(make_user):
    page = client_for(make_user, "viewer").get(reverse("guide")).content.decode()
    assert [re.sub(r"<[^>]+>", "", step) for step in re.findall(r"<li><strong>(.*?)</strong>", page)] == [
        "Bring in the triples to check.", "Weigh their evidence.", "Investigate the doubtful ones.", "Review the verdicts."]
    for term in ("plausibility", "confidence", "evidence-key"):
        assert f'<dt id="{term}">' in page
    assert "manage.py" not in page
    assert "python manage.py import_tasks codex-s --sample 20" in client_for(make_user, "admin").get(reverse("guide")).content.decode()
    assert client_for(make_user, None).get(reverse("guide")).status_code == 403


def test_a_new_installations_queue_says_where_to_start_and_folds_the_filters_a_newcomer_does_not_need(make_user):
    make_world()
    page = client_for(make_user, "curator").get(reverse("queue")).content.decode()
    assert 'id="welcome"' in page and 'id="first-steps"' in page and f'href="{reverse("queue-import")}">imported here' in page
    assert "manage.py" not in page
    assert re.search(r'<details class="more-filters" id="more-filters">', page)  # folded
    filters = page.split('id="filters"')[1].split("</form>")[0]
    visible = filters.split('id="more-filters"')[0]
    assert {name for name in re.findall(r'name="(\w+)"', visible)} == {"q", "status", "verdict"}
    opened = client_for(make_user, "curator").get(reverse("queue"), {"relation": "P27"}).content.decode()
    assert '<details class="more-filters" id="more-filters" open>' in opened  # a filter in use shows itself


def test_an_evidence_source_names_the_kg_not_its_cache_version_and_a_long_url_is_shortened(make_user):
    assert source_label("codex-s (local:codex-s#1:v1@1796451280)") == "codex-s"
    assert source_label("codex-s (local:codex-s#1:v1@1796451280), structural model 4") == "codex-s, structural model 4"
    assert source_label("wikidata (sparql:https://query.wikidata.org/sparql@2)") == "wikidata"
    assert url_label("https://en.wikipedia.org/wiki/Douglas_Adams") == "en.wikipedia.org/wiki/Douglas_Adams"
    assert url_label("https://www.example.org/" + "a" * 80) == "example.org/" + "a" * 27 + "…"

    world = make_world()
    run = make_finished_run(world)
    SupportItem.objects.filter(run=run, key="E1").update(source="runs-kg (local:runs-kg#3:v1@1796451280)")
    page = client_for(make_user, "viewer").get(reverse("run-detail", args=[run.pk])).content.decode()
    cell = re.search(r'id="evidence-E1".*?<td class="source" title="([^"]*)">(.*?)</td>', page, re.S)
    assert cell.groups() == ("runs-kg (local:runs-kg#3:v1@1796451280)", "runs-kg")
