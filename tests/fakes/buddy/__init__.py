"""A fake Buddy.Works Sandbox API: a real aiohttp server on loopback whose sandboxes really
run commands, each in bubblewrap containers of the fake's own (none of the bot's code).

Where the document is unsure it picks what is harder on a client: its exact 400 wordings
for bad paths and ids, ``setup_status`` ahead of ``status``, commands that read INPROGRESS
for a while after their logs end, RESTORING on the way back from a snapshot or a stop,
access rules and rate limits. The server is in ``api``; the other modules are its parts
(see ``api``'s docstring).
"""

from tests.fakes.buddy.api import FakeBuddy, FakeCommand, FakeSandbox, RecordedRequest

__all__ = ["FakeBuddy", "FakeCommand", "FakeSandbox", "RecordedRequest"]
