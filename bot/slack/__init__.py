"""The Slack app: Bolt in Socket Mode, one session per thread."""
