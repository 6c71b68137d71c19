"""What receives: the Bolt app and its listeners, one per kind of Slack input, and the
checks and routing around them."""
