"""The project's own error types; every layer raises these, never raw library errors."""


class BotError(Exception):
    """Base class. The message is safe to show to a user."""


class ConfigError(BotError):
    """A setting is missing or malformed."""


class SandboxError(BotError):
    """A sandbox operation failed (not the user's code: that is a result, not an error)."""


class SandboxUnavailable(SandboxError):
    """The sandbox cannot be used: isolation missing, destroyed, or never became ready."""


class SandboxPathError(SandboxError):
    """A path outside the sandbox layout, or one that does not exist."""


class SandboxConfigError(SandboxUnavailable, ConfigError):
    """The sandbox service rejects the bot's settings (token, workspace, project)."""


class SandboxGone(SandboxUnavailable):
    """The sandbox vanished (deleted, or removed by its service) while a session used it."""
