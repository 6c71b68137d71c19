"""Shared pieces of the fake Messages API's own tests."""

from __future__ import annotations

from typing import Any

import aiohttp
import anthropic

from tests.fakes.anthropic import FakeAnthropic, Reply, text
from tests.fakes.anthropic.context import COMPACT_BETA, CONTEXT_BETA

MODEL = "claude-sonnet-5-5"
QUIET = "claude-sonnet-4-6"  # does not think unless asked: histories can be written by hand
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


async def beta_stream(client: anthropic.AsyncAnthropic, **kw: Any) -> Any:
    """A streamed beta request with both context betas (unless ``betas`` says otherwise),
    as the SDK's accumulator rebuilds it."""
    kw.setdefault("model", QUIET)
    kw.setdefault("max_tokens", 100)
    kw.setdefault("betas", [CONTEXT_BETA, COMPACT_BETA])
    async with client.beta.messages.stream(**kw) as stream:
        return await stream.get_final_message()


async def plain_stream(client: anthropic.AsyncAnthropic, **kw: Any) -> Any:
    async with client.messages.stream(model=QUIET, max_tokens=100, **kw) as stream:
        return await stream.get_final_message()


def dumped(message: Any) -> dict[str, Any]:
    """A reply as the assistant turn a client sends back."""
    return {
        "role": "assistant",
        "content": [b.model_dump(exclude_none=True) for b in message.content],
    }
