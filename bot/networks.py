"""IP networks as settings write them: parsed here, at the settings' own level, so a bad
one is found when the settings are read."""

from __future__ import annotations

import ipaddress

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(text: str) -> tuple[Network, ...]:
    """Comma-separated addresses or networks (`10.0.0.5`, `192.168.0.0/16`, `::1`)."""
    parts = (p.strip() for p in text.split(","))
    return tuple(ipaddress.ip_network(p, strict=False) for p in parts if p)
