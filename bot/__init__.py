"""A Slack code interpreter: answers data questions by running code in a sandbox."""
