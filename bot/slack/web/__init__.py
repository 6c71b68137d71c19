"""The one seam between the bot and Slack's Web API.

`client.SlackWeb` is the only code that calls the Web API: every call paced (`pacing`),
every payload cleaned (`outgoing`, and the secret scrubber), and Slack's error codes read
once into the bot's own types (`errors`). `stream` is a run's streamed message on top of
it (appends batched and paced), `edits` combines repeated edits of one message.
"""

from bot.slack.web.client import SlackWeb, build_client, probe

__all__ = ["SlackWeb", "build_client", "probe"]
