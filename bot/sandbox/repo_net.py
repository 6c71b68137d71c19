"""Where a repository fetch may connect: the host is resolved once, every address it has
must be public (or explicitly allowed), and git is pinned to the address that was checked,
with redirects off, so neither a second lookup (DNS rebinding) nor a redirect can move the
fetch to a private, loopback or link-local address."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bot.errors import SandboxError
from bot.networks import Network

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]  # host, port -> addresses
DEFAULT_PORTS = {"https": 443, "http": 80}
RESOLVE_TIMEOUT_S = 5.0
REPO_MAX_BYTES = 1 << 30


class RepoRefused(SandboxError):
    """A repository host the bot will not connect to; the message says why."""


async def system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def is_public(address: Address) -> bool:
    """Not loopback, private, link-local, multicast, reserved or otherwise special; an
    IPv4-mapped IPv6 address is judged as the IPv4 address it carries."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return address.is_global and not (address.is_multicast or address.is_reserved)


@dataclass(frozen=True)
class FetchRules:
    """What a repository fetch may reach and take in."""

    allowed: tuple[Network, ...] = ()  # private addresses allowed anyway (a git server inside)
    max_bytes: int = REPO_MAX_BYTES  # the checkout, .git included, at most
    resolve: Resolver = system_resolve
    timeout_s: float = RESOLVE_TIMEOUT_S

    def permits(self, address: Address) -> bool:
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        wanted = [a for a in (address, mapped) if a is not None]
        return is_public(address) or any(a in net for a in wanted for net in self.allowed)


NO_RULES = FetchRules()


@dataclass(frozen=True)
class Pinned:
    host: str
    port: int
    address: str  # the checked address git must connect to
    literal: bool = field(default=False)  # the URL named the address itself


async def resolve_checked(url: str, rules: FetchRules = NO_RULES) -> Pinned:
    """Resolve the URL's host once and check every address; a lookup that fails or takes
    longer than the rules allow is a refusal too."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or DEFAULT_PORTS.get(parts.scheme, 443)
    try:
        return _checked(Pinned(host, port, host, literal=True), [ipaddress.ip_address(host)], rules)
    except ValueError:
        pass  # a name
    try:
        found = await asyncio.wait_for(rules.resolve(host, port), rules.timeout_s)
        addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in found]
    except TimeoutError:
        raise RepoRefused(f"looking up {host} took too long; try again later") from None
    except (OSError, ValueError) as exc:
        raise RepoRefused(f"{host} could not be looked up ({exc})") from None
    if not addresses:
        raise RepoRefused(f"{host} could not be looked up (no addresses)")
    return _checked(Pinned(host, port, str(addresses[0])), addresses, rules)


def _checked(pinned: Pinned, addresses: Sequence[Address], rules: FetchRules) -> Pinned:
    if not all(rules.permits(a) for a in addresses):
        raise RepoRefused(
            f"{pinned.host} is or resolves to a private or local address; use a public host."
        )
    return pinned


def git_pin_args(pinned: Pinned) -> list[str]:
    """git config for one fetch: no redirects, and the name bound to the checked address
    (curl's CURLOPT_RESOLVE, git 2.37 and later), so git looks nothing up itself."""
    args = ["-c", "http.followRedirects=false"]
    if not pinned.literal:
        address = f"[{pinned.address}]" if ":" in pinned.address else pinned.address
        args += ["-c", f"http.curloptResolve={pinned.host}:{pinned.port}:{address}"]
    return args
