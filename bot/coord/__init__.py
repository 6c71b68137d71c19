"""How bot processes share the work: leases, shared dedupe and messages between replicas."""

from bot.coord.base import Coordinator, LocalCoordinator

__all__ = ["Coordinator", "LocalCoordinator"]
