"""The Redis store beyond the Store's shared tests (tests/store/test_store.py): starting without a
Redis, the settings that choose it, its keys, and its data across a Redis crash."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path

import pytest
from redis.asyncio import Redis

from bot.cli import main
from bot.compose import build_store
from bot.errors import ConfigError
from bot.settings import Settings, load_settings
from bot.store import RedisStore, SqliteStore, StoreConfigError, StoreError
from tests.redis_server import free_port, redis_server
from tests.store.test_store import file_record, session, tool_call

BUDDY = {"sandbox_backend": "buddy", "buddy_token": "t", "buddy_workspace": "w"}


def settings(**values: object) -> Settings:
    return load_settings(_env_file=None, **values)


# Starting without a Redis.


async def test_an_unreachable_redis_at_start_is_one_line_naming_redis_url() -> None:
    store = RedisStore(f"redis://:hunter2@127.0.0.1:{free_port()}/0")
    with pytest.raises(StoreConfigError) as caught:
        await store.open()
    message = str(caught.value)
    assert isinstance(caught.value, ConfigError)
    assert "REDIS_URL" in message and "\n" not in message
    assert "hunter2" not in message and ":***@127.0.0.1" in message
    with pytest.raises(StoreError):  # it stays closed
        await store.get_session("k")


def test_the_cli_prints_that_line_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env
    for name, value in {**BUDDY, "redis_url": f"redis://127.0.0.1:{free_port()}"}.items():
        monkeypatch.setenv(name.upper(), value)
    assert main(["sessions"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("Configuration error: REDIS_URL:") and "\n" not in err


async def test_ping_fails_while_redis_is_down_and_answers_once_it_is_back() -> None:
    async with redis_server() as server:
        store = RedisStore(server.url)
        await store.open()
        try:
            await store.ping()
            await server.stop()
            with pytest.raises(StoreError, match="Redis"):
                await store.ping()
            await server.start()
            await store.ping()
        finally:
            await store.close()


# Settings.


def test_redis_url_chooses_the_redis_store() -> None:
    store = build_store(settings(redis_url="rediss://redis.internal:6380/2", **BUDDY))
    assert isinstance(store, RedisStore) and store.url == "rediss://redis.internal:6380/2"
    assert isinstance(build_store(settings(**BUDDY)), SqliteStore)
    assert isinstance(build_store(settings(redis_url=" ", **BUDDY)), SqliteStore)
    unix = settings(redis_url="unix:///run/redis.sock?db=1", **BUDDY)
    assert isinstance(build_store(unix), RedisStore)


@pytest.mark.parametrize("backend", [{"sandbox_backend": "local"}, {}])
def test_redis_url_with_local_sandboxes_is_refused(backend: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as caught:
        settings(redis_url="redis://127.0.0.1:6379", **backend)
    message = str(caught.value)
    assert message.startswith("Configuration error: REDIS_URL is set but SANDBOX_BACKEND")
    assert "replica" in message and "\n" not in message


def test_redis_url_must_be_a_redis_url_and_is_not_echoed() -> None:
    with pytest.raises(ConfigError) as caught:
        settings(redis_url="https://:hunter2@redis.internal", **BUDDY)
    assert "REDIS_URL" in str(caught.value) and "hunter2" not in str(caught.value)


def test_the_redis_password_is_scrubbed_from_logs() -> None:
    assert "p@ss" in settings(redis_url="redis://u:p%40ss@h:1/0", **BUDDY).secret_values()
    assert "s3" in settings(redis_url="unix:///r.sock?password=s3", **BUDDY).secret_values()
    assert settings(**BUDDY).secret_values() == ["t"]


# Keys and layout.


async def test_every_key_is_under_the_prefix_and_prefixes_keep_stores_apart() -> None:
    async with redis_server() as server:
        ours, theirs = RedisStore(server.url), RedisStore(server.url, prefix="other:")
        await ours.open()
        await theirs.open()
        try:
            await ours.save_session(session())
            await ours.start_run(session().key, "r1", "q", 1.0, "U1")
            await ours.add_turn(session().key, "r1", {}, 0.5, 2.0)
            await ours.add_feedback("r1", "U1", "good", 3.0)
            await ours.enqueue(session().key, "q", "U1", 4.0)
            assert await theirs.list_sessions() == []
            assert await theirs.spent() == 0.0
            redis = Redis.from_url(server.url, decode_responses=True)
            keys = await redis.keys("*")
            await redis.aclose()
            assert keys and all(k.startswith("sci:") or k == "other:schema" for k in keys)
        finally:
            await ours.close()
            await theirs.close()


async def test_a_session_hash_from_before_prompt_sizes_reads_as_not_known() -> None:
    """Hashes written by the code before the prompt fields lack them; a turn adds them."""
    async with redis_server() as server:
        store = RedisStore(server.url)
        await store.open()
        try:
            await store.save_session(session())
            redis = Redis.from_url(server.url, decode_responses=True)
            await redis.hdel(f"sci:session:{session().key}", "prompt_tokens", "window_tokens")
            await redis.aclose()
            assert await store.get_session(session().key) == session()
            await store.start_run(session().key, "r1", "q", 1.0)
            await store.add_turn(session().key, "r1", {"input_tokens": 5}, None, 2.0)
            assert await store.get_session(session().key) == session(prompt_tokens=5)
        finally:
            await store.close()


async def test_a_newer_layout_is_refused() -> None:
    async with redis_server() as server:
        redis = Redis.from_url(server.url)
        await redis.set("sci:schema", 99)
        await redis.aclose()
        with pytest.raises(StoreError, match="schema version 99"):
            await RedisStore(server.url).open()


async def test_a_redis_without_append_only_file_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with redis_server() as server:
        redis = Redis.from_url(server.url)
        await redis.config_set("appendonly", "no")
        await redis.aclose()
        store = RedisStore(server.url)
        with caplog.at_level(logging.WARNING):
            await store.open()
        await store.close()
    assert "appendonly" in caplog.text


async def test_a_unix_socket_url_works(tmp_path: Path) -> None:
    async with redis_server(tmp_path / "r", unix_socket=True) as server:
        store = RedisStore(server.unix_url)
        await store.open()
        await store.save_session(session())
        assert await store.get_session(session().key) == session()
        await store.close()


# A Redis crash.


async def aof_written(url: str) -> None:
    """Until Redis has handed every acknowledged write to the OS (its AOF buffer is empty)."""
    client = Redis.from_url(url)
    try:
        async with asyncio.timeout(30):
            while (await client.info("persistence"))["aof_buffer_length"]:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
    finally:
        await client.aclose()


@pytest.mark.parametrize("appendfsync", ["always", "everysec"])
async def test_everything_survives_a_redis_crash_with_the_append_only_file(
    tmp_path: Path, appendfsync: str
) -> None:
    """Every acknowledged write is back after SIGKILL and a restart on the same folder, and
    an open store carries on. With everysec too, once the append-only file is written (an OS
    crash could still lose the last second): Redis may hold the write back for up to 2 s
    while an earlier fsync is slow, so the test waits for its buffer to empty first."""
    key = session().key
    async with redis_server(tmp_path / "redis", appendfsync=appendfsync) as server:
        store = RedisStore(server.url)
        await store.open()
        await store.save_session(session())
        await store.save_history(key, [{"role": "user", "content": "hi ✓"}])
        await store.add_file(key, dataclasses.replace(file_record(1), cards=[{"rows": 3}]))
        await store.start_run(key, "r1", "q", 1.0, "U1")
        await store.add_turn(key, "r1", {"output_tokens": 5}, 0.125, 1.5)
        await store.add_tool_call(key, tool_call("r1", 1))
        await store.grant(key, 2.0)
        await store.request_stop("r1", "U2")
        await store.add_feedback("r1", "U1", "good", 2.0)
        queued = await store.enqueue(key, "next?", "U1", 3.0)
        await aof_written(server.url)

        await server.restart(crash=True)

        assert await store.get_session(key) == session(cost_usd=0.125, granted_usd=2.0)
        assert await store.load_history(key) == [{"role": "user", "content": "hi ✓"}]
        assert (await store.files(key))[0].cards == [{"rows": 3}]
        assert [(r.run_id, r.stopped_by) for r in await store.runs_in_flight()] == [("r1", "U2")]
        assert await store.tool_calls(key) == [tool_call("r1", 1)]
        assert [f.value for f in await store.feedback(key)] == ["good"]
        assert await store.spent(user="U1") == 0.125
        assert [q.id for q in await store.take_queued(key)] == [queued]
        assert await store.enqueue(key, "later", "U1", 4.0) > queued  # ids not reused
        await store.close()
