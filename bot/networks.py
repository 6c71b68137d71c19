"""IP networks as settings write them: parsed here, at the settings' own level, so a bad
one is found when the settings are read."""

from __future__ import annotations

import ipaddress

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(text: str) -> tuple[Network, ...]:
    """Comma-separated addresses or networks (`10.0.0.5`, `192.168.0.0/16`, `::1`)."""
    parts = (p.strip() for p in text.split(","))
    return tuple(ipaddress.ip_network(p, strict=False) for p in parts if p)


def parse_ports(text: str) -> frozenset[int]:
    """Comma-separated TCP ports (`443, 80, 8443`)."""
    ports = frozenset(int(p) for p in (p.strip() for p in text.split(",")) if p)
    if not ports or not all(0 < p < 65536 for p in ports):
        raise ValueError("give ports from 1 to 65535, comma-separated")
    return ports
