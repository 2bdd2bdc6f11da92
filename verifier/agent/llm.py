"""The agent's LLM port and its OpenAI-compatible implementation (OpenAI, vLLM, llama.cpp server, Ollama, …).

Plain Python, no Django: the agent and its tests get an `LLM` and call `complete(messages, …)`; what they get
back is a `Completion` with the text, native tool calls, token usage, latency and cost. Every failure that
survives the retries becomes one `LLMError` whose message names the endpoint, the model and what happened, so a
run can record it as a failure instead of losing it.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

import openai
from openai import OpenAI
from openai.types.chat import ChatCompletion

from verifier.retrying import Transient, call_with_retries, retry_after

logger = logging.getLogger(__name__)

__all__ = ["LLM", "Completion", "LLMError", "OpenAICompatibleLLM", "PriceTable"]


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str  # as reported by the server (may be more specific than the configured name)
    latency_ms: float  # wall time of the whole call, retries and back-off included
    finish_reason: str  # "stop", "length", "tool_calls", … ("" when the server sent none)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"id", "name", "arguments": dict}
    attempts: int = 1  # HTTP requests made, 1 + retries
    usage_estimated: bool = False  # the server sent no usage; tokens are len(text) // 4 estimates
    cost_usd: Decimal = Decimal(0)  # from the LLM's PriceTable, by the configured model name
    # With ``top_logprobs``: the most likely first tokens and their log-probabilities ({} if the server sent none).
    first_token_logprobs: dict[str, float] = field(default_factory=dict)


class LLMError(RuntimeError):
    """A call that failed for good: retries exhausted, or a failure that retrying cannot fix."""

    def __init__(self, message: str, *, endpoint: str = "", model: str = "", status_code: int | None = None,
                 attempts: int = 0, retryable: bool = False) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.model = model
        self.status_code = status_code
        self.attempts = attempts
        self.retryable = retryable  # the kind of failure that was retried (the budget ran out), not a 4xx


class LLM(Protocol):
    model: str

    def complete(
        self,
        messages: list[dict],
        *,
        stop: list[str] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        grammar: str | None = None,
        tools: list[dict] | None = None,
        top_logprobs: int | None = None,
    ) -> Completion: ...


# -- prices ----------------------------------------------------------------------------------------------------

_MILLION = Decimal(1_000_000)
_FREE = (Decimal(0), Decimal(0))


@dataclass
class PriceTable:
    """USD per million input / output tokens, by model name; unknown models get `default` (free: local models)."""

    prices: dict[str, tuple[Decimal, Decimal]] = field(default_factory=dict)
    default: tuple[Decimal, Decimal] = _FREE

    @classmethod
    def from_env(cls, value: str) -> PriceTable:
        """Parse `LLM_PRICES`, e.g. "gpt-4o-mini=0.15/0.60,qwen3-max=1.2/6.0,*=0/0" ("*" is the default)."""
        table = cls()
        for raw_entry in value.split(","):
            entry = raw_entry.strip()
            if not entry:
                continue  # a trailing comma is harmless
            # rpartition: model names may contain "/" (org/model) but never need "=", prices never contain "="
            name, equals, price_text = entry.rpartition("=")
            name = name.strip()
            input_text, slash, output_text = price_text.partition("/")
            if not (name and equals and slash):
                raise ValueError(f"LLM_PRICES entry {entry!r} is not model=input/output (USD per 1M tokens)")
            try:
                prices = (Decimal(input_text.strip()), Decimal(output_text.strip()))
            except InvalidOperation:
                raise ValueError(f"LLM_PRICES entry {entry!r} has a price that is not a number") from None
            if any(not p.is_finite() or p < 0 for p in prices):
                raise ValueError(f"LLM_PRICES entry {entry!r} has a negative or infinite price")
            if name == "*":
                table.default = prices
            elif name in table.prices:
                raise ValueError(f"LLM_PRICES entry {entry!r} repeats the model {name!r}")
            else:
                table.prices[name] = prices
        return table

    def price(self, model: str) -> tuple[Decimal, Decimal]:
        # Exact names only: prefix matching would price "gpt-4o-mini" as "gpt-4o" when only the latter is listed.
        return self.prices.get(model, self.default)

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> Decimal:
        input_price, output_price = self.price(model)
        return (input_price * prompt_tokens + output_price * completion_tokens) / _MILLION


# -- the OpenAI-compatible client ------------------------------------------------------------------------------


class OpenAICompatibleLLM:
    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        *,
        temperature: float = 0.0,
        timeout: float = 120.0,
        max_retries: int = 3,
        backoff: float = 1.0,
        max_backoff: float = 20.0,
        prices: PriceTable | None = None,
        supports_grammar: bool = False,
    ) -> None:
        if max_retries < 0 or backoff < 0 or max_backoff < 0 or timeout <= 0:
            raise ValueError("max_retries, backoff and max_backoff must be >= 0 and timeout > 0")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.temperature = temperature
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.prices = prices or PriceTable()
        self.supports_grammar = supports_grammar
        # One client per instance: its httpx connection pool is thread-safe, so Celery threads share it.
        # max_retries=0: the SDK's own retries would hide attempts and ignore our back-off cap; we retry here.
        # Local servers need no key, but the SDK refuses an empty one.
        self._client = OpenAI(base_url=self.base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=0)

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAICompatibleLLM(base_url={self.base_url!r}, model={self.model!r})"

    def complete(
        self,
        messages: list[dict],
        *,
        stop: list[str] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        grammar: str | None = None,
        tools: list[dict] | None = None,
        top_logprobs: int | None = None,
    ) -> Completion:
        request = self._request(messages, stop=stop, temperature=temperature, max_tokens=max_tokens, grammar=grammar,
                                tools=tools)
        if top_logprobs:
            request.update(logprobs=True, top_logprobs=top_logprobs)
        started = time.perf_counter()
        attempts = 0

        def attempt():
            nonlocal attempts
            attempts += 1
            return self._send(request)

        try:
            response = call_with_retries(attempt, retries=self.max_retries, backoff=self.backoff, cap=self.max_backoff,
                                         what=f"LLM {self.model} at {self.base_url}")
        except Transient as failure:
            raise self._error(f"{failure.reason} (gave up after {attempts} attempts)", status_code=failure.status_code,
                              attempts=attempts, retryable=True) from failure
        except LLMError as error:
            error.attempts = attempts
            raise
        return self._completion(response, attempts=attempts, latency_ms=(time.perf_counter() - started) * 1000)

    # -- one attempt ---------------------------------------------------------------------------------------

    def _request(self, messages: list[dict], *, stop: list[str] | None, temperature: float | None, max_tokens: int | None,
                 grammar: str | None, tools: list[dict] | None) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature if temperature is None else temperature,
        }
        if stop:
            request["stop"] = list(stop)
        if max_tokens is not None:
            request["max_tokens"] = max_tokens
        if tools:
            request["tools"] = tools
            request["tool_choice"] = "auto"
        if grammar is not None and self.supports_grammar:
            # A GBNF grammar is a llama.cpp extension; other servers would reject the field, so without support the
            # request goes unconstrained and the caller's parser copes with free text.
            request["grammar"] = grammar
        return request

    def _send(self, request: dict[str, Any]) -> Any:
        """One HTTP attempt: the SDK response, `Transient` for failures another attempt may fix, `LLMError` for permanent ones."""
        try:
            # The request is already in wire format, so it goes out as it is: chat.completions.create would first walk
            # every message of the history through the SDK's TypedDict transform (2.7 ms of CPU per call at 22
            # messages, GIL held), about a fifth of a worker's CPU per verification. Same HTTP path, errors and parsing.
            return self._client.post("/chat/completions", body=request, cast_to=ChatCompletion)
        except openai.APITimeoutError as error:
            raise Transient(f"timed out after {self.timeout:g}s") from error
        except openai.APIConnectionError as error:
            raise Transient(f"connection failed: {_root_cause(error)}") from error
        except openai.APIStatusError as error:
            status = error.status_code
            reason = f"HTTP {status}: {_one_line(_error_message(error))}"
            if status == 429 or status == 408 or status >= 500:  # 408: the server's own request timeout
                raise Transient(reason, status_code=status, retry_after=retry_after(error.response.headers)) from error
            raise self._error(reason, status_code=status) from error
        except openai.APIResponseValidationError as error:
            raise self._error(f"malformed response: {_one_line(str(error))}") from error
        except json.JSONDecodeError as error:  # the SDK lets this through when a JSON content type lies
            raise self._error(f"malformed response: body is not JSON ({error})") from error

    def _completion(self, response: Any, *, attempts: int, latency_ms: float) -> Completion:
        # Without strict validation the SDK returns a gateway's HTML page as a str and a JSON body of the wrong
        # shape as a ChatCompletion with missing fields; both are malformed responses, not crashes.
        if isinstance(response, str):
            raise self._error(f"malformed response: expected JSON, got {_one_line(response)[:120]!r}", attempts=attempts)
        choices = getattr(response, "choices", None)
        if not choices:
            raise self._error("malformed response: no choices in the completion", attempts=attempts)
        choice = choices[0]
        message = getattr(choice, "message", None)
        if message is None:
            raise self._error("malformed response: the first choice has no message", attempts=attempts)
        text = message.content or ""
        tool_calls = [_tool_call(call) for call in message.tool_calls or []]
        usage = response.usage
        prompt_tokens = getattr(usage, "prompt_tokens", None)
        completion_tokens = getattr(usage, "completion_tokens", None)
        estimated = prompt_tokens is None or completion_tokens is None
        if estimated:
            # Some local servers omit usage; ~4 characters per token is the usual rule of thumb for English text.
            prompt_tokens = prompt_tokens if prompt_tokens is not None else 0
            arguments = "".join(json.dumps(c["arguments"]) for c in tool_calls)
            completion_tokens = completion_tokens if completion_tokens is not None else len(text + arguments) // 4
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            model=response.model or self.model,
            latency_ms=latency_ms,
            finish_reason=choice.finish_reason or "",
            tool_calls=tool_calls,
            attempts=attempts,
            usage_estimated=estimated,
            cost_usd=self.prices.cost(self.model, prompt_tokens, completion_tokens),
            first_token_logprobs=_first_token_logprobs(choice),
        )

    # -- helpers -------------------------------------------------------------------------------------------

    def _error(self, what: str, *, status_code: int | None = None, attempts: int = 0, retryable: bool = False) -> LLMError:
        return LLMError(f"LLM call to {self.base_url} (model {self.model!r}) failed: {what}", endpoint=self.base_url,
                        model=self.model, status_code=status_code, attempts=attempts, retryable=retryable)


def _first_token_logprobs(choice: Any) -> dict[str, float]:
    content = getattr(getattr(choice, "logprobs", None), "content", None) or []
    if not content:
        return {}
    first = content[0]
    found = {alt.token: float(alt.logprob) for alt in getattr(first, "top_logprobs", None) or []}
    found.setdefault(first.token, float(first.logprob))
    return found


def _tool_call(call: Any) -> dict[str, Any]:
    function = getattr(call, "function", None)
    if function is None:  # a non-function (custom) tool call: keep what there is
        return {"id": getattr(call, "id", ""), "name": getattr(call, "name", ""), "arguments": {}}
    raw = function.arguments or ""
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        # Models do emit broken or non-object JSON; keep it for the observation instead of failing the run.
        arguments = {"_raw": raw}
    return {"id": call.id or "", "name": function.name, "arguments": arguments}


def _error_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        # The SDK hands over the "error" object of {"error": {...}} bodies; other servers send {"message": ...}.
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return str(message)[:300]
    if isinstance(body, str) and body.strip():
        return body[:300]
    return error.response.reason_phrase or "error"


def _root_cause(error: BaseException) -> str:
    cause: BaseException = error
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    return _one_line(str(cause) or type(cause).__name__)


def _one_line(text: str) -> str:
    return " ".join(text.split())
