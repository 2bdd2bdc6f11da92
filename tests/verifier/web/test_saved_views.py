"""Saved views of the queue: name the filters in use, open them again, replace, remove; each user's own."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from tests.verifier.web.run_pages import make_finished_run, make_world
from verifier.models import SavedView

pytestmark = pytest.mark.django_db


@pytest.fixture
def curator(make_user):
    make_finished_run(make_world())
    user = make_user("curator")
    client = Client()
    client.force_login(user)
    return user, client


def test_a_curator_saves_the_filters_in_use_and_opens_them_again(curator):
    user, client = curator
    queue = client.get(reverse("queue") + "?disputed=true&sort=confidence&assignee=me&page=2").content.decode()
    assert 'id="save-view-form"' in queue and "none yet" in queue

    saved = client.post(reverse("saved-view-save"),
                        {"name": " disputed, mine ", "query": "disputed=true&sort=confidence&assignee=me&page=2"}, follow=True)
    view = SavedView.objects.get(user=user)
    assert view.name == "disputed, mine" and view.query == "disputed=true&assignee=me&sort=confidence"  # no page number
    html = saved.content.decode()
    assert "Saved the view “disputed, mine”." in html
    assert f'href="/?{view.query.replace("&", "&amp;")}" aria-current="true">disputed, mine</a>' in html

    client.post(reverse("saved-view-save"), {"name": "disputed, mine", "query": "verdict=incorrect"})
    view.refresh_from_db()
    assert SavedView.objects.filter(user=user).count() == 1 and view.query == "verdict=incorrect"  # replaced


def test_a_filter_the_queue_refuses_or_a_nameless_view_is_not_saved(curator):
    _, client = curator
    refused = client.post(reverse("saved-view-save"), {"name": "bad", "query": "confidence_min=high"}, follow=True).content.decode()
    assert "The view was not saved" in refused and "confidence_min" in refused
    nameless = client.post(reverse("saved-view-save"), {"name": "  ", "query": "verdict=incorrect"}, follow=True).content.decode()
    assert "a saved view needs a name" in nameless
    assert not SavedView.objects.exists()


def test_views_are_personal(curator, make_user):
    user, client = curator
    client.post(reverse("saved-view-save"), {"name": "mine", "query": "assignee=me"})
    view = SavedView.objects.get(user=user)
    other = Client()
    other.force_login(make_user("reviewer"))
    assert "none yet" in other.get(reverse("queue")).content.decode()
    assert other.post(reverse("saved-view-delete", args=[view.pk])).status_code == 404
    assert SavedView.objects.filter(pk=view.pk).exists()
    client.post(reverse("saved-view-delete", args=[view.pk]))
    assert not SavedView.objects.exists()
