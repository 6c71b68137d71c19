"""Results as data: the tables in an answer or a CSV, and the charts the kernel recorded.
Pure (no I/O) and front-end neutral; the Slack and terminal views render them."""
