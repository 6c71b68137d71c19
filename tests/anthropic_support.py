"""Shared pieces of the fake Messages API's own tests."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.fakes.anthropic_api import FakeAnthropic, Reply, text

MODEL = "claude-sonnet-5-5"
USER_HI = [{"role": "user", "content": "hi"}]
RUN_CODE = {
    "name": "run_code",
    "description": "Run Python code in the sandbox.",
    "input_schema": {"type": "object", "properties": {"code": {"type": "string"}}},
}
# about 1,500 tokens: above the default 1,024-token caching minimum
LONG_SYSTEM = "You are a careful data analyst. Always show the code you ran. " * 100


def visible(message: Any) -> list[Any]:
    """A reply's blocks less its thinking (which every reply of a thinking model starts with)."""
    return [b for b in message.content if b.type not in ("thinking", "redacted_thinking")]


def say(s: str) -> Any:
    return lambda req: Reply([text(s)])


async def raw_post(
    api: FakeAnthropic, body: Any, path: str = "/v1/messages", **headers: str
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """A POST outside the SDK, to see exactly what the server answers: status, JSON body
    and headers (names lower-cased)."""
    hdrs = {"x-api-key": "k", "anthropic-version": "2023-06-01", **headers}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{api.base_url}{path}?beta=true", json=body, headers=hdrs) as resp,
    ):
        answer = {k.lower(): v for k, v in resp.headers.items()}
        return resp.status, await resp.json(), answer
