"""The one seam between the bot and Slack's Web API.

`client.SlackWeb` is the only code that calls the Web API: every call paced (`pacing`),
every payload cleaned (`outgoing`, and the secret scrubber), and Slack's error codes read
once into the bot's own types (`errors`); `edits` combines repeated edits of one message.
A run's streamed message on top of it is `bot/slack/view/stream.py`.
"""

from bot.slack.web.client import SlackWeb, build_client, probe

__all__ = ["SlackWeb", "build_client", "probe"]
