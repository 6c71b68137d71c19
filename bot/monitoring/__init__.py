"""What a running bot shows operators: Prometheus metrics and a readiness check over HTTP."""

from bot.monitoring.hooks import SlackErrors, metered
from bot.monitoring.metrics import Metrics
from bot.monitoring.server import Health, MonitoringServer

__all__ = ["Health", "Metrics", "MonitoringServer", "SlackErrors", "metered"]
