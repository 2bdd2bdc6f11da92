"""The OpenAI-compatible LLM client against a real (scripted) HTTP server: no mocks, the SDK's whole stack runs."""

from __future__ import annotations

import threading
import time
from decimal import Decimal

import pytest
from openai import OpenAI

from tests.http_fixtures import refused_url
from tests.openai_server import ErrorReply, MalformedReply, ScriptedOpenAIServer, TextReply, ToolCall, ToolCallReply
from verifier.agent.llm import LLMError, OpenAICompatibleLLM, PriceTable

MESSAGES = [
    {"role": "system", "content": "You verify facts."},
    {"role": "user", "content": "Is (Douglas Adams, educated at, St John's College) correct?"},
]
PROMPT_WORDS = 3 + 9  # the scripted server counts words in all message contents


def make_llm(server_url: str, **options) -> OpenAICompatibleLLM:
    # Tiny timeouts and back-off keep the retry tests to a fraction of a second each.
    settings = {"timeout": 2.0, "backoff": 0.01, "max_backoff": 0.2, "max_retries": 3, **options}
    return OpenAICompatibleLLM(server_url, "test-key", "test-model", **settings)


def test_completion_reports_text_usage_and_latency():
    with ScriptedOpenAIServer([TextReply("Final Answer: [Correct] Because records agree.", delay=0.05)]) as server:
        completion = make_llm(server.url).complete(MESSAGES)
    assert completion.text == "Final Answer: [Correct] Because records agree."
    assert (completion.prompt_tokens, completion.completion_tokens, completion.usage_estimated) == (PROMPT_WORDS, 6, False)
    assert completion.model == "test-model"
    assert completion.finish_reason == "stop"
    assert completion.latency_ms >= 50
    assert (completion.attempts, completion.tool_calls) == (1, [])
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "test-model"
    assert request.messages == MESSAGES
    assert request.temperature == 0.0
    assert request.header("authorization") == "Bearer test-key"
    assert not {"grammar", "response_format", "tools", "stop"} & request.body.keys()


def test_missing_usage_is_estimated_from_the_text():
    with ScriptedOpenAIServer([TextReply("x" * 40, include_usage=False)]) as server:
        completion = make_llm(server.url).complete(MESSAGES)
    assert completion.usage_estimated is True
    assert completion.completion_tokens == 10


def test_per_call_temperature_and_max_tokens_are_sent():
    with ScriptedOpenAIServer(["one two three four five"]) as server:
        completion = make_llm(server.url, temperature=0.2).complete(MESSAGES, temperature=0.9, max_tokens=3)
    assert (server.requests[0].temperature, server.requests[0].body["max_tokens"]) == (0.9, 3)
    assert (completion.text, completion.finish_reason) == ("one two three", "length")


def test_stop_sequences_are_sent_and_honoured():
    step = "Thought: check the college.\nAction: KG_Path(Douglas Adams, St John's College)\nObservation: invented"
    with ScriptedOpenAIServer([step]) as server:
        completion = make_llm(server.url).complete(MESSAGES, stop=["Observation:", "[Observation]"])
    assert server.requests[0].stop == ["Observation:", "[Observation]"]
    assert completion.text == "Thought: check the college.\nAction: KG_Path(Douglas Adams, St John's College)\n"
    assert completion.finish_reason == "stop"


def test_grammar_is_sent_in_the_extra_body_only_when_the_server_supports_it():
    grammar = 'root ::= "Final Answer: [" ("Correct" | "Incorrect") "]"'
    with ScriptedOpenAIServer(["a", "b"]) as server:
        make_llm(server.url, supports_grammar=True).complete(MESSAGES, grammar=grammar)
        make_llm(server.url, supports_grammar=False).complete(MESSAGES, grammar=grammar)
    assert server.bodies[0]["grammar"] == grammar
    assert "grammar" not in server.bodies[1]


TOOLS = [{"type": "function", "function": {
    "name": "KG_Path", "description": "Paths between two entities.",
    "parameters": {"type": "object", "properties": {"entity_a": {"type": "string"}, "entity_b": {"type": "string"}}},
}}]


def test_native_tool_calls_are_parsed():
    reply = ToolCallReply([ToolCall("KG_Path", {"entity_a": "Q42", "entity_b": "Q691283"})], text="Looking for a path.")
    with ScriptedOpenAIServer([reply]) as server:
        completion = make_llm(server.url).complete(MESSAGES, tools=TOOLS)
    assert server.bodies[0]["tools"] == TOOLS
    assert server.bodies[0]["tool_choice"] == "auto"
    assert completion.finish_reason == "tool_calls"
    assert completion.text == "Looking for a path."
    assert [(c["name"], c["arguments"]) for c in completion.tool_calls] == [("KG_Path", {"entity_a": "Q42", "entity_b": "Q691283"})]
    assert completion.tool_calls[0]["id"]  # needed to answer the call with a role "tool" message


def test_malformed_tool_arguments_are_kept_raw():
    calls = [ToolCall("KG_Path", '{"entity_a": "Q42", entity_b'), ToolCall("KG_Definition", '["Q42"]'), ToolCall("Web_Evidence", "")]
    with ScriptedOpenAIServer([ToolCallReply(calls)]) as server:
        completion = make_llm(server.url).complete(MESSAGES, tools=TOOLS)
    assert [c["arguments"] for c in completion.tool_calls] == [{"_raw": '{"entity_a": "Q42", entity_b'}, {"_raw": '["Q42"]'}, {}]


def test_rate_limit_retry_after_is_honoured():
    with ScriptedOpenAIServer([ErrorReply(429, retry_after=0.3), "ok"]) as server:
        started = time.monotonic()
        completion = make_llm(server.url, max_backoff=5.0).complete(MESSAGES)
        elapsed = time.monotonic() - started
    assert (completion.text, completion.attempts) == ("ok", 2)
    assert server.requests[1].received_at - server.requests[0].received_at >= 0.3
    assert elapsed < 2.0


def test_a_long_retry_after_is_capped_by_max_backoff():
    with ScriptedOpenAIServer([ErrorReply(429, retry_after=3600), "ok"]) as server:
        started = time.monotonic()
        completion = make_llm(server.url, max_backoff=0.1).complete(MESSAGES)
    assert completion.text == "ok"
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors_are_retried_until_success(status):
    with ScriptedOpenAIServer([status, status, "recovered"]) as server:
        completion = make_llm(server.url).complete(MESSAGES)
    assert (completion.text, completion.attempts, len(server.bodies)) == ("recovered", 3, 3)


def test_a_timeout_is_retried_until_success():
    with ScriptedOpenAIServer([TextReply("too late", delay=1.0), "in time"]) as server:
        started = time.monotonic()
        completion = make_llm(server.url, timeout=0.2).complete(MESSAGES)
    assert (completion.text, completion.attempts) == ("in time", 2)
    assert time.monotonic() - started < 0.9
    assert completion.latency_ms >= 200  # the failed attempt counts: latency is what the caller waited


def test_giving_up_after_max_retries_names_endpoint_model_and_status():
    with ScriptedOpenAIServer([503, 503, 503]) as server:
        with pytest.raises(LLMError) as caught:
            make_llm(server.url, max_retries=2).complete(MESSAGES)
    message = str(caught.value)
    assert server.url in message and "'test-model'" in message
    assert "HTTP 503" in message and "service unavailable" in message and "3 attempts" in message
    assert "\n" not in message
    assert (caught.value.status_code, caught.value.attempts, caught.value.retryable) == (503, 3, True)
    assert len(server.bodies) == 3


def test_giving_up_on_timeouts_says_so():
    with ScriptedOpenAIServer([TextReply("late", delay=1.0)] * 2) as server:
        with pytest.raises(LLMError, match=r"timed out after 0\.15s \(gave up after 2 attempts\)"):
            make_llm(server.url, timeout=0.15, max_retries=1).complete(MESSAGES)


@pytest.mark.parametrize(("status", "text"), [(400, "context length exceeded"), (401, "invalid api key"), (404, "model not found")])
def test_client_errors_are_not_retried(status, text):
    with ScriptedOpenAIServer([ErrorReply(status, text)]) as server:  # one reply: a retry would overrun the script
        with pytest.raises(LLMError) as caught:
            make_llm(server.url).complete(MESSAGES)
    assert f"HTTP {status}: {text}" in str(caught.value)
    assert (caught.value.status_code, caught.value.attempts, caught.value.retryable) == (status, 1, False)
    assert len(server.bodies) == 1


def test_connection_refused_fails_quickly_with_a_clear_error():
    url = refused_url() + "/v1"
    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        make_llm(url, max_retries=2).complete(MESSAGES)
    assert time.monotonic() - started < 1.0
    assert str(caught.value) == (
        f"LLM call to {url} (model 'test-model') failed: connection failed: connection refused (gave up after 3 attempts)"
    )


@pytest.mark.parametrize("reply", [
    MalformedReply(),  # a gateway's HTML page with status 200
    MalformedReply(b'{"choices": [', content_type="application/json"),
    MalformedReply(b'{"object": "error", "detail": "overloaded"}', content_type="application/json"),
], ids=["html", "broken-json", "wrong-shape"])
def test_a_malformed_response_is_an_llm_error_not_a_crash(reply):
    with ScriptedOpenAIServer([reply]) as server:
        with pytest.raises(LLMError, match="malformed response"):
            make_llm(server.url).complete(MESSAGES)


def test_one_client_serves_concurrent_threads():
    def answer(body: dict) -> str:
        return f"answer for {body['messages'][-1]['content']}"

    results: dict[int, str] = {}
    with ScriptedOpenAIServer(answer, latency=0.2) as server:
        llm = make_llm(server.url)

        def ask(number: int) -> None:
            results[number] = llm.complete([{"role": "user", "content": f"q{number}"}]).text

        threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert results == {n: f"answer for q{n}" for n in range(8)}
    assert time.monotonic() - started < 1.0  # the calls overlapped (one after another would take 1.6 s)


def test_the_scripted_server_lists_its_models():
    with ScriptedOpenAIServer(models=["qwen3-8b", "local"]) as server:
        models = OpenAI(base_url=server.url, api_key="x", max_retries=0).models.list()
    assert [m.id for m in models.data] == ["qwen3-8b", "local"]


# -- prices ----------------------------------------------------------------------------------------------------


def test_price_table_parses_llm_prices_and_costs_calls():
    table = PriceTable.from_env(" gpt-4o-mini=0.15/0.60, qwen3-max=1.2/6.0 ,meta-llama/Llama-3.1-8B=0.02/0.05,*=0/0,")
    assert table.cost("gpt-4o-mini", 1_000_000, 1_000_000) == Decimal("0.75")
    assert table.cost("qwen3-max", 23_031, 2_275) == Decimal("0.0412872")
    assert table.cost("meta-llama/Llama-3.1-8B", 1_000_000, 0) == Decimal("0.02")
    assert table.cost("local", 50_000, 5_000) == 0


def test_price_table_default_entry_prices_unknown_models():
    assert PriceTable.from_env("*=1/2").cost("anything", 1_000_000, 500_000) == Decimal(2)
    assert PriceTable.from_env("").cost("local", 10**6, 10**6) == 0  # nothing configured: local models are free


@pytest.mark.parametrize("entry", ["gpt-4o", "gpt-4o=0.15", "gpt-4o=abc/0.6", "=0.1/0.2", "gpt-4o=-1/2", "gpt-4o=1/inf"])
def test_price_table_rejects_a_bad_entry_by_name(entry):
    with pytest.raises(ValueError, match="LLM_PRICES entry") as caught:
        PriceTable.from_env(f"ok=1/2,{entry}")
    assert repr(entry) in str(caught.value)


def test_price_table_rejects_a_repeated_model():
    with pytest.raises(ValueError, match="repeats the model 'a'"):
        PriceTable.from_env("a=1/2,a=3/4")


def test_a_completion_carries_its_cost():
    prices = PriceTable.from_env("test-model=1000000/2000000")  # $1 per input token, $2 per output token
    with ScriptedOpenAIServer(["two words"]) as server:
        completion = make_llm(server.url, prices=prices).complete(MESSAGES)
    assert completion.cost_usd == Decimal(PROMPT_WORDS * 1 + 2 * 2)


# -- the client the product builds ----------------------------------------------------------------------------


def test_the_embedded_model_gets_a_long_timeout_and_no_retries_and_a_remote_endpoint_the_settings(settings):
    from verifier.wiring import EMBEDDED_TIMEOUT_SECONDS, _llm

    settings.LLM_TIMEOUT_SECONDS, settings.LLM_MAX_RETRIES = 120.0, 3
    _llm.cache_clear()
    embedded = _llm("http://127.0.0.1:8011/v1", "qwen2.5-coder-1.5b", True)
    remote = _llm("https://api.example.org/v1", "qwen2.5-coder-1.5b", False)
    _llm.cache_clear()
    assert (embedded.timeout, embedded.max_retries) == (EMBEDDED_TIMEOUT_SECONDS, 0)
    assert (remote.timeout, remote.max_retries) == (120.0, 3)
