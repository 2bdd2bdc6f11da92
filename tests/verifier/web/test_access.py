"""Who may open which queue, memory-bank, evaluation and audit page: anonymous users are sent to sign in, a role too low
gets the 403 page and changes nothing, the role the page needs gets it. Also the shared layout."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from django.urls import reverse

from tests.http_fixtures import refused_url
from tests.verifier.web.run_pages import make_finished_run, make_world
from tests.verifier.web.workbench import RANK, client_for, fast_password_hashing, is_login_redirect, signed_in, upload  # noqa: F401  (autouse fixture)
from verifier.agent.weighing import FEATURES
from verifier.memory import bank
from verifier.models import AuditEvent, ConfidenceModel, Evaluation, MemoryEntry, Review, Run, SavedView, VerificationTask, Webhook
from verifier.roles import ROLES
from verifier.web import confidence, entities, evaluations, kg_changes, memory, queue, reviewers, saved_views, structure, webhooks

pytestmark = pytest.mark.django_db


@dataclass
class Endpoint:
    name: str  # the URL name
    method: str
    url: Callable[[dict], str]
    role: str  # the lowest role allowed
    data: Callable[[dict], dict] = field(default=lambda rows: {})
    label: str = ""
    writes: bool = True  # a POST that changes something, and so leaves an audit event

    def __str__(self) -> str:
        return self.label or self.name


ENDPOINTS = [
    Endpoint("queue", "get", lambda rows: reverse("queue"), "viewer"),
    Endpoint("home", "get", lambda rows: reverse("home"), "viewer"),
    Endpoint("queue-rows", "get", lambda rows: reverse("queue-rows") + f"?tasks={rows['task'].pk}", "viewer"),
    Endpoint("structure-status", "get", lambda rows: reverse("structure-status") + f"?kg={rows['kg'].pk}", "viewer"),
    Endpoint("queue-bulk", "post", lambda rows: reverse("queue-bulk"), "viewer", label="bulk export",
             data=lambda rows: {"action": "export", "fmt": "json", "tasks": [rows["run"].task_id]}, writes=False),
    Endpoint("queue-bulk", "post", lambda rows: reverse("queue-bulk"), "curator", label="bulk run",
             data=lambda rows: {"action": "run", "tasks": [rows["task"].pk]}),
    Endpoint("queue-bulk", "post", lambda rows: reverse("queue-bulk"), "curator", label="bulk assign",
             data=lambda rows: {"action": "assign", "tasks": [rows["task"].pk], "assignee": rows["curator"].pk}),
    Endpoint("queue-import", "get", lambda rows: reverse("queue-import"), "curator"),
    Endpoint("queue-import", "post", lambda rows: reverse("queue-import"), "curator", label="import a file",
             data=lambda rows: {"kg": rows["kg"].pk, "file": upload("flagged.csv", "Q42,P19,Q142\n")}),
    Endpoint("audit-log", "get", lambda rows: reverse("audit-log"), "admin"),
    Endpoint("webhook-list", "get", lambda rows: reverse("webhook-list"), "admin"),
    Endpoint("webhook-list", "post", lambda rows: reverse("webhook-list"), "admin", label="register a webhook",
             data=lambda rows: {"url": "https://example.org/hook", "events": ["run.finished"]}),
    Endpoint("webhook-test", "post", lambda rows: reverse("webhook-test", args=[rows["webhook"].pk]), "admin"),
    Endpoint("webhook-toggle", "post", lambda rows: reverse("webhook-toggle", args=[rows["webhook"].pk]), "admin"),
    Endpoint("webhook-delete", "post", lambda rows: reverse("webhook-delete", args=[rows["webhook"].pk]), "admin"),
    Endpoint("saved-view-save", "post", lambda rows: reverse("saved-view-save"), "viewer",
             data=lambda rows: {"name": "disputed", "query": "disputed=true&sort=confidence&page=3"}),
    Endpoint("saved-view-delete", "post", lambda rows: reverse("saved-view-delete", args=[_view_of_the_signed_in_user().pk]),
             "viewer"),
    Endpoint("reviewers", "get", lambda rows: reverse("reviewers"), "viewer"),
    Endpoint("kg-changes", "get", lambda rows: reverse("kg-changes"), "viewer"),
    Endpoint("kg-changes-apply", "post", lambda rows: reverse("kg-changes-apply", args=[rows["kg"].pk]), "admin",
             label="apply a KG's changes with no decision settled", writes=False),
    Endpoint("structure-train", "post", lambda rows: reverse("structure-train", args=[rows["kg"].pk]), "admin",
             label="train the model of a KG with no triples loaded", writes=False),
    Endpoint("confidence", "get", lambda rows: reverse("confidence"), "viewer"),
    Endpoint("confidence-reliability", "get", lambda rows: reverse("confidence-reliability", args=[rows["kg"].pk]), "viewer"),
    Endpoint("confidence-refit", "post", lambda rows: reverse("confidence-refit", args=[rows["kg"].pk]), "admin",
             label="refit on too few reviews", writes=False),
    Endpoint("confidence-verify-calibration", "post", lambda rows: reverse("confidence-verify-calibration", args=[rows["kg"].pk]),
             "admin", label="verify the calibration triples of a KG with no structural model", writes=False),
    Endpoint("confidence-fit-calibration", "post", lambda rows: reverse("confidence-fit-calibration", args=[rows["kg"].pk]),
             "admin", label="fit on calibration triples not verified yet", writes=False),
    Endpoint("confidence-activate", "post", lambda rows: reverse("confidence-activate", args=[rows["candidate"].pk]), "admin"),
    Endpoint("confidence-stand-down", "post", lambda rows: reverse("confidence-stand-down", args=[rows["in_force"].pk]), "admin"),
    Endpoint("entity-lookup", "get", lambda rows: reverse("entity-lookup") + "?q=Douglas", "viewer"),
    Endpoint("memory-list", "get", lambda rows: reverse("memory-list") + "?q=Douglas&mode=similar", "viewer"),
    Endpoint("memory-detail", "get", lambda rows: reverse("memory-detail", args=[rows["entry"].pk]), "viewer"),
    Endpoint("memory-status", "post", lambda rows: reverse("memory-status", args=[rows["entry"].pk]), "reviewer",
             label="retire", data=lambda rows: {"status": "retired"}),
    Endpoint("memory-review", "post", lambda rows: reverse("memory-review", args=[rows["entry"].pk]), "reviewer",
             label="review", data=lambda rows: {"lesson": "The KG names another country."}),
    Endpoint("memory-bulk", "post", lambda rows: reverse("memory-bulk"), "reviewer",
             label="bulk retire", data=lambda rows: {"action": "retire", "entries": [rows["entry"].pk]}),
    Endpoint("evaluations:list", "get", lambda rows: reverse("evaluations:list"), "viewer"),
    Endpoint("evaluations:detail", "get", lambda rows: reverse("evaluations:detail", args=[rows["evaluation"].pk]), "viewer"),
    Endpoint("evaluations:chart", "get", lambda rows: reverse("evaluations:chart", args=[rows["evaluation"].pk, "relations"]),
             "viewer"),
    Endpoint("evaluations:compare", "get",
             lambda rows: reverse("evaluations:compare") + f"?a={rows['evaluation'].pk}&b={rows['evaluation'].pk}", "viewer"),
    Endpoint("evaluations:start", "post", lambda rows: reverse("evaluations:start"), "admin", label="start an unknown benchmark",
             data=lambda rows: {"benchmark": "nowhere", "mode": "kge", "n": 10, "seed": 0}, writes=False),
    Endpoint("evaluations:resume", "post", lambda rows: reverse("evaluations:resume", args=[rows["evaluation"].pk]), "admin"),
    Endpoint("evaluations:stop", "post", lambda rows: reverse("evaluations:stop", args=[rows["evaluation"].pk]), "admin",
             label="stop an evaluation not running", writes=False),
    Endpoint("evaluations:suite", "get", lambda rows: reverse("evaluations:suite", args=["access"]), "viewer"),
    Endpoint("evaluations:suite-chart", "get", lambda rows: reverse("evaluations:suite-chart", args=["access"]), "viewer"),
    Endpoint("run-promote", "get", lambda rows: reverse("run-promote", args=[rows["run"].pk]), "reviewer"),
    Endpoint("run-promote", "post", lambda rows: reverse("run-promote", args=[rows["run"].pk]), "reviewer", label="promote",
             data=lambda rows: {"triple_text": "Douglas Adams citizen of the UK", "trajectory": "Thought: edited"}),
]


def _view_of_the_signed_in_user():
    """A saved view of the user the test has just signed in (the newest): only its owner may remove it."""
    from django.contrib.auth import get_user_model

    return SavedView.objects.create(user=get_user_model().objects.latest("pk"), name="mine", query="assignee=me")


def _below(role: str) -> str | None:
    return ROLES[ROLES.index(role) - 1] if role != ROLES[0] else None


@pytest.fixture
def rows(make_user) -> dict:
    world = make_world()
    run = make_finished_run(world)
    Review.objects.create(run=run, reviewer=make_user("reviewer", "rosa"), decision="accept", verdict="correct")  # promotable
    Run.objects.filter(pk=run.pk).update(confidence=0.9)  # a reviewed verdict with a confidence: the reliability chart
    weights = {"features": FEATURES, "coefficients": [0.0] * len(FEATURES), "intercept": 0.0}
    entry = bank.add_entry(triple_text="Douglas Adams country of citizenship United Kingdom", trajectory="Thought: …",
                           verdict="correct")
    evaluation = Evaluation.objects.create(name="access-codex", suite="access", kg=world.kg, benchmark="codex-s",
                                           sample_size=2)
    return {"kg": world.kg, "task": world.task("Q145", "P17", "Q142"), "run": run, "entry": entry,
            "curator": make_user("curator", "assignable"), "evaluation": evaluation,
            "webhook": Webhook.objects.create(url=refused_url() + "/hook"),  # a test delivery fails fast
            "in_force": ConfidenceModel.objects.create(kg=world.kg, source="in force", **weights),
            "candidate": ConfidenceModel.objects.create(kg=world.kg, source="candidate", active=False, **weights)}


def _state() -> tuple:
    """Everything a page could write."""
    return (AuditEvent.objects.count(), Run.objects.count(), VerificationTask.objects.count(),
            list(VerificationTask.objects.order_by("pk").values_list("assignee_id", flat=True)),
            list(MemoryEntry.objects.order_by("pk").values_list("status", "lesson")), Review.objects.count(),
            list(Webhook.objects.order_by("pk").values_list("active", flat=True)))


def test_every_page_url_is_in_the_matrix():
    names = {pattern.name for pattern in [*queue.urlpatterns, *memory.urlpatterns, *structure.urlpatterns, *webhooks.urlpatterns,
                                          *saved_views.urlpatterns, *entities.urlpatterns,
                                          *reviewers.urlpatterns, *confidence.urlpatterns, *kg_changes.urlpatterns]}
    names |= {f"{evaluations.app_name}:{pattern.name}" for pattern in evaluations.urlpatterns}
    assert names == {endpoint.name for endpoint in ENDPOINTS}


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
@pytest.mark.parametrize("who", ["anonymous", "below", "needed"])
def test_each_page_admits_exactly_the_roles_it_needs(make_user, rows, endpoint, who):
    role = {"anonymous": "anonymous", "below": _below(endpoint.role), "needed": endpoint.role}[who]
    client = client_for(make_user, role)
    before = _state()
    response = getattr(client, endpoint.method)(endpoint.url(rows), endpoint.data(rows))
    if role == "anonymous":
        assert is_login_redirect(response), response.status_code
        assert _state() == before
    elif RANK[role] < RANK[endpoint.role]:
        assert response.status_code == 403
        assert f"needs the {endpoint.role} role." in response.content.decode()
        assert _state() == before
    else:
        answers_a_page = endpoint.method == "get" or endpoint.label == "bulk export"  # the file itself
        assert response.status_code == (200 if answers_a_page else 302), response.content.decode()[:1500]
        assert not is_login_redirect(response)
        if endpoint.method == "post" and endpoint.writes:
            assert AuditEvent.objects.count() > before[0], "every write leaves an audit event"


def test_the_forbidden_page_names_the_role_held_and_the_role_needed(make_user):
    response = client_for(make_user, "curator").get(reverse("audit-log"))
    page = response.content.decode()
    assert response.status_code == 403 and "This needs the admin role." in page
    assert "with the role\n    <strong>curator</strong>" in page


@pytest.mark.parametrize("role", ["viewer", "curator", "reviewer", "admin"])
def test_the_layout_shows_the_areas_the_user_and_role_and_a_sign_out_button(make_user, role):
    user = make_user(role)
    client = signed_in(user)
    page = client.get(reverse("memory-list")).content.decode()
    nav = page.split('<nav class="primary"')[1].split("</nav>")[0]
    assert '<a href="/">Queue</a>' in nav
    assert '<a href="/memory/" aria-current="page">Memory bank</a>' in nav
    assert '<a href="/evaluations/">Evaluations</a>' in nav and '<a href="/api/docs/">API docs</a>' in nav
    assert ('<a href="/audit/">Audit log</a>' in nav) is (role == "admin")
    assert f'{user.username}<span class="role role-{role}">{role}</span>' in page
    assert f'<form method="post" action="{reverse("logout")}" class="inline">' in page
    curate = client.get(reverse("queue")).content.decode()
    assert ('href="/import/"' in curate) is (role != "viewer")
