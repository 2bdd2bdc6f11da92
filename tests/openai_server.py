"""A scripted OpenAI-compatible chat server on 127.0.0.1 for tests and benchmarks of LLM clients and the agent.

It speaks the real wire format (`POST /v1/chat/completions`, `GET /v1/models`), so the client under test runs
its whole HTTP stack (the `openai` SDK, retries, timeouts) and nothing is mocked:

    script = [
        "Thought: look it up\\nAction: KG_Path(Q1, Q2)\\nObservation: never sent",  # plain text
        TextReply("Final Answer: [Correct] Because …", delay=0.05),             # text after 50 ms
        ToolCallReply([ToolCall("KG_Path", {"entity_a": "Q1", "entity_b": "Q2"})]),
        ErrorReply(429, retry_after=0.1),                                         # or just 429
        MalformedReply(),                                                         # an HTML page with 200
    ]
    with ScriptedOpenAIServer(script) as server:
        client = OpenAI(base_url=server.url, api_key="x")     # server.url == "http://127.0.0.1:PORT/v1"
        ...
        server.requests[0].stop, server.requests[0].body["grammar"], server.requests[-1].prompt

Replies are consumed one per chat request, in order. Instead of a list the script may be a callable
`(request_body: dict) -> reply` that answers by looking at the prompt. Shorthands: a `str` is a `TextReply`,
an `int` is an `ErrorReply` with that status. When a list script runs out the server answers with `default`
if one was given, otherwise HTTP 500 and `__exit__` fails the test (a client asked more than the test expected).

Like a real server it cuts the scripted text at the first stop string (finish_reason "stop") and at
`max_tokens` words (finish_reason "length"). Token counts are deterministic: prompt_tokens = words in all
message contents, completion_tokens = words in the reply (text and tool-call arguments).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# -- replies ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextReply:
    text: str
    finish_reason: str = "stop"
    delay: float = 0.0  # seconds before answering: a slow model, or a client timeout
    include_usage: bool = True  # some servers omit `usage`; the client must cope
    # With a request that asks for logprobs: the first token's alternatives and their log-probabilities.
    top_logprobs: dict[str, float] | None = None


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] | str  # a str is sent verbatim, so a test can send malformed JSON arguments


@dataclass(frozen=True)
class ToolCallReply:
    calls: list[ToolCall]
    text: str = ""  # content next to the tool calls (most servers send null; some send a thought)
    delay: float = 0.0
    include_usage: bool = True


@dataclass(frozen=True)
class ErrorReply:
    status: int
    message: str = ""
    retry_after: float | str | None = None  # sent as the Retry-After header (seconds or an HTTP date)
    delay: float = 0.0


# A gateway's error page where JSON was expected: the most common malformed answer in practice.
GATEWAY_PAGE = b"<html><body><h1>502 Bad Gateway</h1></body></html>"


@dataclass(frozen=True)
class MalformedReply:
    body: bytes = GATEWAY_PAGE
    status: int = 200
    content_type: str = "text/html"  # "application/json" with a non-JSON body is the other common variant
    delay: float = 0.0


Reply = TextReply | ToolCallReply | ErrorReply | MalformedReply
ReplyLike = Reply | str | int
Script = Iterable[ReplyLike] | Callable[[dict[str, Any]], ReplyLike]


def as_reply(value: ReplyLike) -> Reply:
    if isinstance(value, bool):  # bool is an int subclass; a True in a script is surely a mistake
        raise TypeError(f"not a scripted reply: {value!r}")
    if isinstance(value, str):
        return TextReply(value)
    if isinstance(value, int):
        return ErrorReply(value)
    if isinstance(value, TextReply | ToolCallReply | ErrorReply | MalformedReply):
        return value
    raise TypeError(f"not a scripted reply: {value!r}")


# -- recorded requests -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]  # the decoded JSON body, every field as sent (grammar, response_format, tools, …)
    received_at: float = field(default_factory=time.monotonic)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def stop(self) -> list[str]:
        return _stop_list(self.body.get("stop"))

    @property
    def temperature(self) -> float | None:
        return self.body.get("temperature")

    @property
    def prompt(self) -> str:
        """All message contents joined by blank lines: what a callable script usually looks at."""
        return prompt_text(self.body)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


def _stop_list(stop: Any) -> list[str]:
    if stop is None:
        return []
    return [stop] if isinstance(stop, str) else [s for s in stop if isinstance(s, str)]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def prompt_text(body: dict[str, Any]) -> str:
    return "\n\n".join(_content_text(m.get("content")) for m in body.get("messages") or [] if isinstance(m, dict))


def count_words(text: str) -> int:
    return len(text.split())


# -- the server ------------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a handler sleeping in a delay must not hold up teardown

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out hangs up mid-reply: that is the scenario under test, not a server failure.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ScriptedOpenAIServer:
    def __init__(
        self,
        script: Script = (),
        *,
        default: ReplyLike | None = None,
        latency: float = 0.0,
        model: str | None = None,
        models: list[str] | None = None,
    ) -> None:
        """`latency`: seconds added to every chat reply (benchmarks). `model`: the name reported in replies
        (default: echo the requested one, as llama.cpp does). `models`: what `/v1/models` lists."""
        self._callable = script if callable(script) else None
        self._queue: deque[ReplyLike] = deque() if callable(script) else deque(script)
        self._default = default
        self.latency = latency
        self.model = model
        self.models = models or [model or "scripted-model"]
        self.requests: list[RecordedRequest] = []
        self.overruns = 0  # chat requests that found the script exhausted
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._counter = 0
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    def add(self, *replies: ReplyLike) -> None:
        """Append replies to a list script (e.g. between two phases of a test)."""
        with self._lock:
            self._queue.extend(replies)

    def __enter__(self) -> ScriptedOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        self._stopping.set()  # wakes handlers sleeping in a delay
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        if self.overruns and exc_type is None:
            raise AssertionError(f"the scripted OpenAI server got {self.overruns} chat request(s) beyond its script")

    # -- answering -----------------------------------------------------------------------------------------

    def _next_reply(self, body: dict[str, Any]) -> Reply | None:
        if self._callable is not None:
            return as_reply(self._callable(body))
        with self._lock:
            if self._queue:
                return as_reply(self._queue.popleft())
            if self._default is not None:
                return as_reply(self._default)
            self.overruns += 1
            return None

    def _next_id(self) -> int:
        with self._lock:
            self._counter += 1
            return self._counter

    def chat(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) for one chat request, after the scripted delay."""
        reply = self._next_reply(body)
        if reply is None:
            return _error(500, "scripted server: the script is exhausted", "server_error")
        self._stopping.wait(self.latency + reply.delay)
        if isinstance(reply, ErrorReply):
            status, headers, payload = _error(reply.status, reply.message or _REASONS.get(reply.status, "error"))
            if reply.retry_after is not None:
                headers["Retry-After"] = str(reply.retry_after)
            return status, headers, payload
        if isinstance(reply, MalformedReply):
            return reply.status, {"Content-Type": reply.content_type}, reply.body
        return 200, {"Content-Type": "application/json"}, json.dumps(self._completion(body, reply)).encode()

    def _completion(self, body: dict[str, Any], reply: TextReply | ToolCallReply) -> dict[str, Any]:
        number = self._next_id()
        message: dict[str, Any] = {"role": "assistant"}
        if isinstance(reply, TextReply):
            text, finish_reason = _apply_limits(reply.text, reply.finish_reason, body)
            message["content"] = text
            generated = count_words(text)
        else:
            message["content"] = reply.text or None
            message["tool_calls"] = [
                {
                    "id": f"call_{number}_{index}",
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments),
                    },
                }
                for index, call in enumerate(reply.calls)
            ]
            finish_reason = "tool_calls"
            generated = count_words(reply.text) + sum(count_words(c["function"]["arguments"]) for c in message["tool_calls"])
        completion: dict[str, Any] = {
            "id": f"chatcmpl-scripted-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model or body.get("model") or "scripted-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": _logprobs(reply, body)}],
        }
        if reply.include_usage:
            prompt = count_words(prompt_text(body))
            completion["usage"] = {"prompt_tokens": prompt, "completion_tokens": generated, "total_tokens": prompt + generated}
        return completion

    def model_list(self) -> dict[str, Any]:
        created = int(time.time())
        return {"object": "list", "data": [{"id": m, "object": "model", "created": created, "owned_by": "scripted"} for m in self.models]}

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                owner._record(RecordedRequest(path, self._headers(), {}))
                if path.rstrip("/").endswith("/models"):
                    self._send(200, {"Content-Type": "application/json"}, json.dumps(owner.model_list()).encode())
                else:
                    self._send(*_error(404, f"no route for GET {path}", "not_found"))

            def do_POST(self) -> None:
                path = self.path.split("?", 1)[0]
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    owner._record(RecordedRequest(path, self._headers(), {"_raw": raw.decode(errors="replace")}))
                    self._send(*_error(400, "request body is not JSON"))
                    return
                owner._record(RecordedRequest(path, self._headers(), body))
                if not path.rstrip("/").endswith("/chat/completions"):
                    self._send(*_error(404, f"no route for POST {path}", "not_found"))
                elif not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                    self._send(*_error(400, "'messages' is required"))
                else:
                    self._send(*owner.chat(body))

            def _headers(self) -> dict[str, str]:
                return {name.lower(): value for name, value in self.headers.items()}

            def _send(self, status: int, headers: dict[str, str], payload: bytes) -> None:
                self.send_response(status)
                for name, value in {**headers, "Content-Length": str(len(payload))}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

        return Handler


_REASONS = {400: "bad request", 401: "invalid api key", 404: "model not found", 429: "rate limit exceeded",
            500: "internal server error", 502: "bad gateway", 503: "service unavailable"}
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error"}


def _error(status: int, message: str, error_type: str | None = None) -> tuple[int, dict[str, str], bytes]:
    kind = error_type or _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    payload = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return status, {"Content-Type": "application/json"}, json.dumps(payload).encode()


_WORD_END = re.compile(r"\S+")


def _apply_limits(text: str, finish_reason: str, body: dict[str, Any]) -> tuple[str, str]:
    """Cut the text where a real server would stop generating: the first stop string, or max_tokens words."""
    cuts = [index for index in (text.find(s) for s in _stop_list(body.get("stop")) if s) if index >= 0]
    if cuts:
        text, finish_reason = text[: min(cuts)], "stop"
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    if isinstance(limit, int) and limit >= 0:
        words = list(_WORD_END.finditer(text))
        if len(words) > limit:
            text, finish_reason = text[: words[limit - 1].end()] if limit else "", "length"
    return text, finish_reason


def _logprobs(reply, body: dict) -> dict | None:
    """The chat API's logprobs block for the reply's first token, when asked for and scripted."""
    if not body.get("logprobs") or not isinstance(reply, TextReply) or not reply.top_logprobs:
        return None
    ranked = sorted(reply.top_logprobs.items(), key=lambda kv: -kv[1])[: body.get("top_logprobs") or 1]
    token, logprob = ranked[0]
    alternatives = [{"token": t, "logprob": lp, "bytes": None} for t, lp in ranked]
    return {"content": [{"token": token, "logprob": logprob, "bytes": None, "top_logprobs": alternatives}]}

