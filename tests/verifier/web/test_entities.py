"""Entity look-up: by id, label or a misspelt name, with the flagged triples each entity takes part in."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.verifier.web.workbench import client_for, fast_password_hashing  # noqa: F401  (autouse fixture)
from verifier.models import Entity, Relation, VerificationTask

pytestmark = pytest.mark.django_db


def test_an_entity_is_found_by_id_label_or_a_misspelt_name_with_its_flagged_triples(world_kg, make_user):
    adams = Entity.objects.get(kg=world_kg, external_id="Q42")
    VerificationTask.objects.create(kg=world_kg, head=adams, relation=Relation.objects.get(kg=world_kg, external_id="P27"),
                                    tail=Entity.objects.get(kg=world_kg, external_id="Q145"))
    client = client_for(make_user, "viewer")
    for text in ("Q42", "douglas adams", "Duglas Adams"):
        page = client.get(reverse("entity-lookup"), {"q": text, "kg": world_kg.pk}).content.decode()
        assert 'data-entity="Q42"' in page, text
    page = client.get(reverse("entity-lookup"), {"q": "Duglas Adams"}).content.decode()
    assert "fuzzy" in page and 'href="/?q=Q42&amp;origin=all">1</a>' in page
    nothing = client.get(reverse("entity-lookup"), {"q": "Zzyzx Qwerty"}).content.decode()
    assert 'id="no-entity"' in nothing
