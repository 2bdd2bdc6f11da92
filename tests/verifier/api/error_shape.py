"""The API's one error shape, asserted."""


def assert_error(response, status: int, code: str | None = None) -> dict:
    """The response is the API's one error shape with this status (and code)."""
    assert response.status_code == status, response.content[:500]
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]
