"""SearxNG and Brave adapters against a local HTTP server answering in each provider's real JSON format."""

from __future__ import annotations

import time

import pytest

from tests.http_fixtures import LocalHTTPServer, refused_url
from verifier.evidence.base import EvidenceError, WebHit, WebSearchProvider
from verifier.evidence.web import BraveProvider, SearxngProvider, provider_from_env, rerank

# Shaped like a SearxNG 2025 instance's /search?format=json reply (trimmed to three results).
SEARXNG_BODY = {
    "query": "Douglas Adams birthplace",
    "number_of_results": 0,
    "results": [
        {
            "url": "https://en.wikipedia.org/wiki/Douglas_Adams",
            "title": "Douglas Adams - Wikipedia",
            "content": "Douglas Noël Adams (11 March 1952 – 11 May 2001) was an English author, humourist, and screenwriter, "
            "best known for The Hitchhiker's Guide to the Galaxy. Adams was born in Cambridge.",
            "publishedDate": None,
            "thumbnail": "",
            "engine": "duckduckgo",
            "template": "default.html",
            "parsed_url": ["https", "en.wikipedia.org", "/wiki/Douglas_Adams", "", "", ""],
            "img_src": "",
            "priority": "",
            "engines": ["duckduckgo", "brave", "wikipedia"],
            "positions": [1, 1, 1],
            "score": 9.0,
            "category": "general",
        },
        {
            "url": "https://www.britannica.com/biography/Douglas-Adams",
            "title": "Douglas Adams | Biography, Books, & Facts | Britannica",
            "content": "Douglas Adams, English  writer whose absurdist\n science fiction satirized contemporary society.",
            "engine": "brave",
            "parsed_url": ["https", "www.britannica.com", "/biography/Douglas-Adams", "", "", ""],
            "engines": ["brave"],
            "positions": [2],
            "score": 0.5,
            "category": "general",
        },
        {
            "url": "https://douglasadams.com/",
            "title": "The Douglas Adams Homepage",
            "content": None,
            "engine": "brave",
            "engines": ["brave"],
            "positions": [3],
            "score": 0.33,
            "category": "general",
        },
    ],
    "answers": [],
    "corrections": [],
    "infoboxes": [
        {
            "infobox": "Douglas Adams",
            "id": "https://en.wikipedia.org/wiki/Douglas_Adams",
            "content": "English writer",
            "engine": "wikipedia",
        }
    ],
    "suggestions": ["douglas adams books"],
    "unresponsive_engines": [],
}

# Shaped like a Brave Search API /res/v1/web/search reply (trimmed; other sections such as "mixed" omitted).
BRAVE_BODY = {
    "type": "search",
    "query": {
        "original": "Douglas Adams birthplace",
        "show_strict_warning": False,
        "is_navigational": False,
        "is_news_breaking": False,
        "spellcheck_off": True,
        "country": "us",
        "bad_results": False,
        "should_fallback": False,
        "postal_code": "",
        "city": "",
        "header_country": "",
        "more_results_available": True,
        "state": "",
    },
    "mixed": {"type": "mixed", "main": [{"type": "web", "index": 0, "all": False}], "top": [], "side": []},
    "web": {
        "type": "search",
        "results": [
            {
                "title": "<strong>Douglas</strong> <strong>Adams</strong> - Wikipedia",
                "url": "https://en.wikipedia.org/wiki/Douglas_Adams",
                "is_source_local": False,
                "is_source_both": False,
                "description": "<strong>Douglas</strong> Noël <strong>Adams</strong> was born in Cambridge, England &amp; "
                "wrote The Hitchhiker&#x27;s Guide to the Galaxy.",
                "page_age": "2025-01-05T10:12:00",
                "profile": {"name": "Wikipedia", "url": "https://en.wikipedia.org/wiki/Douglas_Adams", "long_name": "en.wikipedia.org"},
                "language": "en",
                "family_friendly": True,
                "type": "search_result",
                "subtype": "generic",
                "meta_url": {
                    "scheme": "https",
                    "netloc": "en.wikipedia.org",
                    "hostname": "en.wikipedia.org",
                    "path": "› wiki › Douglas_Adams",
                },
                "age": "January 5, 2025",
            },
            {
                "title": "Douglas Adams | Biography, Books, &amp; Facts | Britannica",
                "url": "https://www.britannica.com/biography/Douglas-Adams",
                "description": "<strong>Douglas</strong> <strong>Adams</strong>, English writer whose absurdist science fiction...",
                "language": "en",
                "family_friendly": True,
                "type": "search_result",
                "subtype": "generic",
            },
        ],
        "family_friendly": True,
    },
}

BRAVE_TOKEN_INVALID = {
    "type": "ErrorResponse",
    "error": {
        "id": "0f2d5c1e-7d0e-4f47-9d58-0d7fe5a0e0b1",
        "status": 422,
        "code": "SUBSCRIPTION_TOKEN_INVALID",
        "detail": "The provided subscription token is invalid.",
        "meta": {"component": "authentication"},
    },
    "time": 1735900000,
}

FAST = {"timeout": 0.3, "backoff": 0.01}


@pytest.fixture
def server():
    with LocalHTTPServer() as running:
        yield running


def searxng_at(server: LocalHTTPServer, **options) -> SearxngProvider:
    server.route("/search", SEARXNG_BODY)
    return SearxngProvider(server.url, **{**FAST, **options})


def brave_at(server: LocalHTTPServer, **options) -> BraveProvider:
    server.route("/res/v1/web/search", BRAVE_BODY)
    return BraveProvider("test-key", base_url=server.url + "/res/v1", **{**FAST, **options})


BOTH = [pytest.param(searxng_at, id="searxng"), pytest.param(brave_at, id="brave")]


# -- SearxNG -------------------------------------------------------------------------------------------------


def test_searxng_parses_results_in_provider_order(server):
    hits = searxng_at(server).search("Douglas Adams birthplace")

    assert [hit.url for hit in hits] == [
        "https://en.wikipedia.org/wiki/Douglas_Adams",
        "https://www.britannica.com/biography/Douglas-Adams",
        "https://douglasadams.com/",
    ]
    assert hits[0].title == "Douglas Adams - Wikipedia"
    assert hits[0].snippet.endswith("Adams was born in Cambridge.")
    assert hits[1].snippet == "Douglas Adams, English writer whose absurdist science fiction satirized contemporary society."
    assert hits[2].snippet == ""  # SearxNG sends content: null for some engines
    assert {hit.source for hit in hits} == {"searxng"}


def test_searxng_asks_for_json_in_the_general_category(server):
    searxng_at(server, language="en").search("Douglas Adams birthplace")

    request = server.requests[-1]
    assert request.path == "/search"
    assert request.param("q") == "Douglas Adams birthplace"
    assert request.param("format") == "json"
    assert request.param("categories") == "general"
    assert request.param("language") == "en"
    assert "json" in request.header("Accept")


def test_searxng_leaves_language_to_the_instance_unless_given(server):
    searxng_at(server).search("x")
    assert "language" not in server.requests[-1].query


def test_searxng_cuts_results_to_the_limit(server):
    assert len(searxng_at(server).search("Douglas Adams", limit=2)) == 2


def test_searxng_403_explains_that_json_must_be_enabled(server):
    provider = searxng_at(server)
    server.fail_next(403, body="<!doctype html><title>403 Forbidden</title>")

    with pytest.raises(EvidenceError, match=r"^searxng: HTTP 403 .*search\.formats"):
        provider.search("x")


def test_searxng_reports_failed_engines_instead_of_an_empty_answer(server):
    server.route("/search", {**SEARXNG_BODY, "results": [], "unresponsive_engines": [["google", "timeout"], ["duckduckgo", "CAPTCHA"]]})
    provider = SearxngProvider(server.url, **FAST)

    with pytest.raises(EvidenceError, match=r"searxng: no results.*google \(timeout\), duckduckgo \(CAPTCHA\)"):
        provider.search("x")


def test_searxng_with_no_results_returns_an_empty_list(server):
    server.route("/search", {**SEARXNG_BODY, "results": [], "number_of_results": 0})
    assert SearxngProvider(server.url, **FAST).search("qwxzy") == []


# -- Brave ---------------------------------------------------------------------------------------------------


def test_brave_parses_web_results_and_strips_highlighting(server):
    hits = brave_at(server).search("Douglas Adams birthplace")

    assert [hit.url for hit in hits] == [
        "https://en.wikipedia.org/wiki/Douglas_Adams",
        "https://www.britannica.com/biography/Douglas-Adams",
    ]
    assert hits[0].title == "Douglas Adams - Wikipedia"
    assert hits[0].snippet == "Douglas Noël Adams was born in Cambridge, England & wrote The Hitchhiker's Guide to the Galaxy."
    assert hits[1].title == "Douglas Adams | Biography, Books, & Facts | Britannica"
    assert all("<" not in hit.snippet and "&#" not in hit.snippet for hit in hits)
    assert {hit.source for hit in hits} == {"brave"}


def test_brave_sends_the_token_header_and_count(server):
    brave_at(server).search("Douglas Adams birthplace", limit=7)

    request = server.requests[-1]
    assert request.path == "/res/v1/web/search"
    assert request.param("q") == "Douglas Adams birthplace"
    assert request.param("count") == "7"
    assert request.header("X-Subscription-Token") == "test-key"
    assert request.header("Accept") == "application/json"


def test_brave_never_asks_for_more_than_the_api_allows(server):
    brave_at(server).search("x", limit=50)
    assert server.requests[-1].param("count") == "20"


def test_brave_reply_without_a_web_section_means_no_hits(server):
    server.route("/res/v1/web/search", {key: value for key, value in BRAVE_BODY.items() if key != "web"})
    assert BraveProvider("k", base_url=server.url + "/res/v1", **FAST).search("qwxzy") == []


def test_brave_401_says_the_key_was_rejected(server):
    provider = brave_at(server)
    server.fail_next(401, body={"type": "ErrorResponse", "error": {"status": 401, "code": "UNAUTHORIZED", "detail": "Unauthorized"}})

    with pytest.raises(EvidenceError, match=r"^brave: HTTP 401 .*check BRAVE_API_KEY"):
        provider.search("x")
    assert len(server.requests) == 1  # a bad key is not retried


def test_brave_token_invalid_422_says_the_key_was_rejected(server):
    provider = brave_at(server)
    server.fail_next(422, body=BRAVE_TOKEN_INVALID)

    with pytest.raises(EvidenceError) as raised:
        provider.search("x")
    message = str(raised.value)
    assert message.startswith("brave: HTTP 422")
    assert "The provided subscription token is invalid." in message and "check BRAVE_API_KEY" in message
    assert "\n" not in message


# -- failures common to both ---------------------------------------------------------------------------------


@pytest.mark.parametrize("make_provider", BOTH)
def test_a_server_error_is_retried_and_then_succeeds(server, make_provider):
    provider = make_provider(server)
    server.fail_next(500)
    server.fail_next(429, headers={"Retry-After": "0"})

    assert len(provider.search("Douglas Adams")) >= 2
    assert len(server.requests) == 3


@pytest.mark.parametrize("make_provider", BOTH)
def test_a_persistent_server_error_gives_up_after_the_retries(server, make_provider):
    provider = make_provider(server, retries=2)
    server.fail_next(503, times=5)

    with pytest.raises(EvidenceError, match=r"HTTP 503 from 127\.0\.0\.1:\d+ after 3 attempts"):
        provider.search("x")
    assert len(server.requests) == 3


def test_a_retry_after_header_is_honoured(server):
    provider = searxng_at(server)
    server.fail_next(429, headers={"Retry-After": "0.2"})

    started = time.monotonic()
    assert provider.search("x")
    assert 0.2 <= time.monotonic() - started < 2


@pytest.mark.parametrize("make_provider", BOTH)
def test_a_server_that_does_not_answer_in_time_is_a_timeout(server, make_provider):
    provider = make_provider(server, timeout=0.2, retries=1)
    server.delay_next(2.0, times=2)

    started = time.monotonic()
    with pytest.raises(EvidenceError, match=r"did not answer within 0\.2 s \(2 attempts\)") as raised:
        provider.search("x")
    assert time.monotonic() - started < 1.5
    assert str(raised.value).startswith(provider.name + ":")


@pytest.mark.parametrize("make_provider", BOTH)
def test_one_slow_answer_is_retried(server, make_provider):
    provider = make_provider(server, timeout=0.2)
    server.delay_next(1.0)

    assert provider.search("Douglas Adams")
    assert len(server.requests) == 2


@pytest.mark.parametrize("make_provider", BOTH)
def test_a_body_that_is_not_json_is_reported(server, make_provider):
    provider = make_provider(server)
    server.malformed_next()

    with pytest.raises(EvidenceError, match=r"malformed response .*not JSON: '<html>"):
        provider.search("x")


@pytest.mark.parametrize(
    ("make_provider", "path", "body"),
    [
        pytest.param(searxng_at, "/search", {"query": "x", "results": {"url": "https://example.org"}}, id="searxng"),
        pytest.param(brave_at, "/res/v1/web/search", {"type": "search", "web": ["not", "an", "object"]}, id="brave"),
    ],
)
def test_json_of_the_wrong_shape_is_reported(server, make_provider, path, body):
    provider = make_provider(server)
    server.route(path, body)

    with pytest.raises(EvidenceError, match=r"malformed response"):
        provider.search("x")


@pytest.mark.parametrize(
    "provider",
    [
        pytest.param(lambda url: SearxngProvider(url, **FAST), id="searxng"),
        pytest.param(lambda url: BraveProvider("k", base_url=url, **FAST), id="brave"),
    ],
)
def test_connection_refused_is_reported_without_retrying(provider):
    url = refused_url()
    started = time.monotonic()
    with pytest.raises(EvidenceError, match=r"cannot connect to 127\.0\.0\.1:\d+ \(connection refused\)"):
        provider(url).search("x")
    assert time.monotonic() - started < 0.5


def test_providers_without_their_setting_say_what_is_missing():
    with pytest.raises(EvidenceError, match="searxng: not configured.*SEARXNG_URL"):
        SearxngProvider("")
    with pytest.raises(EvidenceError, match="brave: not configured.*BRAVE_API_KEY"):
        BraveProvider("")


# -- provider_from_env ---------------------------------------------------------------------------------------


def test_no_web_search_settings_means_no_provider():
    assert provider_from_env({}) is None
    assert provider_from_env({"WEB_SEARCH_PROVIDER": "", "SEARXNG_URL": "", "BRAVE_API_KEY": ""}) is None


def test_searxng_is_preferred_when_its_url_is_set():
    provider = provider_from_env({"SEARXNG_URL": "http://127.0.0.1:8888/", "BRAVE_API_KEY": "k"})
    assert isinstance(provider, SearxngProvider) and isinstance(provider, WebSearchProvider)
    assert provider.base_url == "http://127.0.0.1:8888"


def test_brave_is_chosen_when_only_its_key_is_set():
    provider = provider_from_env({"BRAVE_API_KEY": "k"})
    assert isinstance(provider, BraveProvider) and isinstance(provider, WebSearchProvider)
    assert provider.base_url == "https://api.search.brave.com/res/v1"


def test_an_explicit_provider_wins_and_brave_base_url_is_honoured():
    provider = provider_from_env(
        {"WEB_SEARCH_PROVIDER": "Brave", "SEARXNG_URL": "http://s", "BRAVE_API_KEY": "k", "BRAVE_BASE_URL": "http://127.0.0.1:9/v1"}
    )
    assert isinstance(provider, BraveProvider) and provider.base_url == "http://127.0.0.1:9/v1"


def test_env_selection_reaches_the_local_server(server):
    server.route("/search", SEARXNG_BODY)
    provider = provider_from_env({"WEB_SEARCH_PROVIDER": "searxng", "SEARXNG_URL": server.url})
    assert provider is not None and provider.search("Douglas Adams")[0].source == "searxng"


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({"WEB_SEARCH_PROVIDER": "searxng", "BRAVE_API_KEY": "k"}, "SEARXNG_URL"),
        ({"WEB_SEARCH_PROVIDER": "brave", "SEARXNG_URL": "http://s"}, "BRAVE_API_KEY"),
        ({"WEB_SEARCH_PROVIDER": "google"}, "WEB_SEARCH_PROVIDER"),
        ({"SEARXNG_URL": "127.0.0.1:8888"}, "SEARXNG_URL"),
    ],
)
def test_a_provider_missing_its_setting_names_the_variable(environ, variable):
    with pytest.raises(ValueError, match=variable):
        provider_from_env(environ)


# -- rerank --------------------------------------------------------------------------------------------------

RERANK_HITS = [
    WebHit(
        "The Hitchhiker's Guide (radio series)", "https://example.org/radio", "A comedy radio series broadcast by the BBC in 1978.", "brave"
    ),
    WebHit(
        "Cambridge United F.C.", "https://example.org/football", "Cambridge United is a football club that plays in League One.", "brave"
    ),
    WebHit(
        "Douglas Adams",
        "https://en.wikipedia.org/wiki/Douglas_Adams",
        "Douglas Adams was born on 11 March 1952 in Cambridge, England.",
        "brave",
    ),
    WebHit("Douglas Adams (copy)", "https://en.wikipedia.org/wiki/Douglas_Adams/", "Born in Cambridge, England, in 1952.", "searxng"),
    WebHit(
        "Pan Galactic Gargle Blaster",
        "https://example.org/drink",
        "A fictional cocktail described as the best drink in existence.",
        "brave",
    ),
]


def test_rerank_puts_the_relevant_snippet_first_with_the_real_encoder():
    from verifier.memory import encoder

    ranked = rerank("Where was Douglas Adams born?", RERANK_HITS, encode=encoder.encode, limit=3)

    assert ranked[0].url == "https://en.wikipedia.org/wiki/Douglas_Adams"
    assert ranked[0].snippet.startswith("Douglas Adams was born")  # the first copy of a URL is the one kept
    assert len(ranked) == 3
    assert len({hit.url.rstrip("/") for hit in ranked}) == 3
    scores = [hit.score for hit in ranked]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0.5


def test_rerank_of_nothing_does_not_encode():
    def refuse(texts):
        raise AssertionError("encode should not be called")

    assert rerank("q", [], encode=refuse) == []
    assert rerank("q", RERANK_HITS, encode=refuse, limit=0) == []


def test_rerank_rejects_an_encoder_that_returns_the_wrong_number_of_vectors():
    import numpy as np

    with pytest.raises(ValueError, match="vectors"):
        rerank("q", RERANK_HITS[:2], encode=lambda texts: np.ones((1, 4), dtype=np.float32))
