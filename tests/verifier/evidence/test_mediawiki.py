"""MediaWikiSource against a local HTTP server answering like the MediaWiki Action API (formatversion=2)."""

from __future__ import annotations

import pytest

from tests.http_fixtures import LocalHTTPServer, RecordedRequest, Reply, refused_url
from verifier.evidence.base import EncyclopediaSource, EvidenceError
from verifier.evidence.mediawiki import MediaWikiSource

USER_AGENT = "KGV-tests/1.0 (https://example.org/kgv; kgv@example.org)"

# page id → (title, lead extract); the ids decide the order of `query.pages`, as on the real API.
PAGES = {
    8091: ("Douglas Adams", "Douglas Noël Adams (11 March 1952 – 11 May 2001) was an English author, humourist, and screenwriter."),
    11958: ("The Hitchhiker's Guide to the Galaxy", "The Hitchhiker's Guide to the Galaxy is a comedy science fiction franchise."),
    36563: ("Cambridge", "Cambridge is a city and non-metropolitan district in the county of Cambridgeshire, England."),
    99001: ("Empty lead", ""),
}
REDIRECTS = {"Douglas adams": "Douglas Adams", "Douglas Noël Adams": "Douglas Adams"}
SEARCHES = {
    # srsearch → titles in ranking order (note: not page-id order)
    "Douglas Adams Cambridge": ["Cambridge", "Douglas Adams", "The Hitchhiker's Guide to the Galaxy", "Empty lead"],
}


def normalise(title: str) -> str:
    title = title.replace("_", " ").strip()
    return title[:1].upper() + title[1:]


def wiki_api(request: RecordedRequest) -> Reply:
    """The subset of api.php?action=query that MediaWikiSource uses, in the real response shapes."""
    if request.param("action") != "query" or request.param("format") != "json" or request.param("formatversion") != "2":
        return Reply({"error": {"code": "badvalue", "info": "Unexpected parameters.", "docref": "See /w/api.php."}})
    if request.param("list") == "search":
        titles = SEARCHES.get(request.param("srsearch") or "", [])[: int(request.param("srlimit") or 10)]
        by_title = {title: page_id for page_id, (title, _) in PAGES.items()}
        search = [
            {"ns": 0, "title": title, "pageid": by_title[title], "snippet": f'<span class="searchmatch">{title}</span> &amp; more'}
            for title in titles
        ]
        query = {"searchinfo": {"totalhits": len(search)}, "search": search}
        return Reply({"batchcomplete": True, "continue": {"sroffset": len(search), "continue": "-||"}, "query": query})
    if request.param("prop") == "extracts":
        return Reply({"batchcomplete": True, "query": extracts_query(request.param("titles") or "")})
    return Reply({"batchcomplete": True})


def extracts_query(titles: str) -> dict:
    query: dict = {"normalized": [], "redirects": [], "pages": []}
    by_title = {title: (page_id, extract) for page_id, (title, extract) in PAGES.items()}
    found, missing = [], []
    for asked in titles.split("|"):
        title = normalise(asked)
        if title != asked:
            query["normalized"].append({"fromencoded": False, "from": asked, "to": title})
        if title in REDIRECTS:
            query["redirects"].append({"from": title, "to": REDIRECTS[title]})
            title = REDIRECTS[title]
        if title in by_title:
            page_id, extract = by_title[title]
            found.append({"pageid": page_id, "ns": 0, "title": title, "extract": extract})
        else:
            missing.append({"ns": 0, "title": title, "missing": True})
    query["pages"] = missing + sorted(found, key=lambda page: page["pageid"])
    return {key: value for key, value in query.items() if value}


@pytest.fixture
def server():
    with LocalHTTPServer() as running:
        running.route("/w/api.php", wiki_api)
        yield running


@pytest.fixture
def wiki(server) -> MediaWikiSource:
    return MediaWikiSource(server.url + "/w/api.php", user_agent=USER_AGENT, timeout=0.3, backoff=0.01)


def test_summary_returns_the_lead_section_with_its_page_url(wiki, server):
    passage = wiki.summary("Douglas Adams")

    assert passage is not None
    assert passage.title == "Douglas Adams"
    assert passage.text.startswith("Douglas Noël Adams (11 March 1952")
    assert passage.url == f"{server.url}/wiki/Douglas_Adams"
    assert passage.source == "wikipedia (live)"
    assert isinstance(wiki, EncyclopediaSource)


def test_summary_sends_the_user_agent_and_asks_for_plain_intro_text(wiki, server):
    wiki.summary("Douglas Adams")

    request = server.requests[-1]
    assert request.header("User-Agent") == USER_AGENT
    assert request.path == "/w/api.php"
    expected = {
        "action": "query",
        "prop": "extracts",
        "exintro": "1",
        "explaintext": "1",
        "redirects": "1",
        "titles": "Douglas Adams",
        "format": "json",
        "formatversion": "2",
    }
    assert {name: request.param(name) for name in expected} == expected


def test_summary_follows_normalisation_and_redirects(wiki):
    passage = wiki.summary("douglas_adams")

    assert passage is not None and passage.title == "Douglas Adams"
    assert passage.url.endswith("/wiki/Douglas_Adams")


def test_summary_of_a_missing_page_is_none(wiki):
    assert wiki.summary("Qwxzy nonexistent article") is None
    assert wiki.summary("Empty lead") is None
    assert wiki.summary("   ") is None


def test_page_urls_are_encoded_like_mediawiki_does(wiki, server):
    passage = wiki.summary("The Hitchhiker's Guide to the Galaxy")
    assert passage is not None
    assert passage.url == f"{server.url}/wiki/The_Hitchhiker%27s_Guide_to_the_Galaxy"


def test_the_default_api_builds_wikipedia_urls():
    wikipedia = MediaWikiSource(user_agent=USER_AGENT)
    assert wikipedia.api_url == "https://en.wikipedia.org/w/api.php"
    assert wikipedia._page_url("Douglas Adams") == "https://en.wikipedia.org/wiki/Douglas_Adams"


def test_search_runs_list_search_then_one_batched_extracts_request(wiki, server):
    passages = wiki.search("Douglas Adams Cambridge", limit=3)

    assert [passage.title for passage in passages] == ["Cambridge", "Douglas Adams", "The Hitchhiker's Guide to the Galaxy"]
    assert passages[1].text.startswith("Douglas Noël Adams")
    assert all(passage.source == "wikipedia (live)" and passage.url.startswith(server.url + "/wiki/") for passage in passages)
    search, extracts = server.requests
    assert search.param("list") == "search" and search.param("srsearch") == "Douglas Adams Cambridge"
    assert search.param("srlimit") == "3"
    assert extracts.param("titles") == "Cambridge|Douglas Adams|The Hitchhiker's Guide to the Galaxy"
    assert extracts.param("exlimit") == "3"
    assert all(request.header("User-Agent") == USER_AGENT for request in server.requests)


def test_search_uses_the_search_snippet_when_a_page_has_no_lead_text(wiki):
    passages = wiki.search("Douglas Adams Cambridge", limit=10)

    assert passages[-1].title == "Empty lead"
    assert passages[-1].text == "Empty lead & more"


def test_search_without_hits_makes_one_request(wiki, server):
    assert wiki.search("qwxzy") == []
    assert len(server.requests) == 1
    assert wiki.search("   ") == []
    assert len(server.requests) == 1


def test_search_asks_for_at_most_twenty_extracts(wiki, server):
    wiki.search("Douglas Adams Cambridge", limit=100)
    assert server.requests[0].param("srlimit") == "20"


def test_an_api_error_reported_with_status_200_is_an_evidence_error(wiki, server):
    server.route(
        "/w/api.php",
        Reply(
            {
                "error": {"code": "internal_api_error_DBQueryError", "info": "[abc123] Database query error.", "docref": "See /w/api.php"},
                "servedby": "mw-api-ext.eqiad.main-1",
            }
        ),
    )
    with pytest.raises(
        EvidenceError, match=r"^wikipedia \(live\): API error internal_api_error_DBQueryError: \[abc123\] Database query error\.$"
    ):
        wiki.summary("Douglas Adams")


def test_a_server_error_is_retried(wiki, server):
    server.fail_next(503, body="<html>Wikimedia Error</html>")

    assert wiki.summary("Cambridge") is not None
    assert len(server.requests) == 2


def test_a_blocked_client_gets_a_clear_message(wiki, server):
    server.fail_next(403, body="Please set a user-agent and respect our robot policy https://w.wiki/4wJS.")

    with pytest.raises(EvidenceError, match=r"^wikipedia \(live\): HTTP 403 .*User-Agent"):
        wiki.summary("Cambridge")


def test_timeouts_malformed_bodies_and_refused_connections_are_evidence_errors(wiki, server):
    server.delay_next(1.0, times=3)
    with pytest.raises(EvidenceError, match=r"did not answer within 0\.3 s \(3 attempts\)"):
        wiki.summary("Cambridge")

    server.malformed_next()
    with pytest.raises(EvidenceError, match=r"malformed response .*not JSON"):
        wiki.search("Douglas Adams Cambridge")

    server.route("/w/api.php", Reply({"batchcomplete": True, "query": {"pages": {"8091": {"title": "Douglas Adams"}}}}))
    with pytest.raises(EvidenceError, match=r"malformed extracts response"):
        wiki.summary("Douglas Adams")

    unreachable = MediaWikiSource(refused_url() + "/w/api.php", user_agent=USER_AGENT, timeout=0.3)
    with pytest.raises(EvidenceError, match=r"^wikipedia \(live\): cannot connect .*connection refused"):
        unreachable.summary("Cambridge")


def test_a_user_agent_is_required():
    with pytest.raises(ValueError, match="user_agent"):
        MediaWikiSource(user_agent=" ")
    with pytest.raises(ValueError, match="http"):
        MediaWikiSource("en.wikipedia.org/w/api.php", user_agent=USER_AGENT)
