"""Channel memory: notes people save for a channel, given to every run there."""
