"""Where a repository fetch may connect: the host is resolved once, every address it has
must be public (or explicitly allowed), and git is pinned to the address that was checked,
with redirects off, so neither a second lookup (DNS rebinding) nor a redirect can move the
fetch to a private, loopback or link-local address. An IPv6 address that carries an IPv4
one (IPv4-mapped, 6to4, Teredo, NAT64) is judged as the IPv4 address it reaches, and only
the ports an operator allows (443 and 80 by default) may be named."""

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
ALLOWED_PORTS = frozenset({443, 80})  # REPO_ALLOWED_PORTS may name others
RESOLVE_TIMEOUT_S = 5.0
REPO_MAX_BYTES = 1 << 30


class RepoRefused(SandboxError):
    """A repository host the bot will not connect to; the message says why."""


async def system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def is_public(address: Address) -> bool:
    """Not loopback, private, link-local, multicast, reserved or otherwise special; an IPv6
    address carrying IPv4 ones is judged by those (all must be public)."""
    carried = carried_ipv4(address)
    if carried:
        return all(_is_public(a) for a in carried)
    return _is_public(address)


def _is_public(address: Address) -> bool:
    return address.is_global and not (address.is_multicast or address.is_reserved)


NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052's well-known prefix
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: the site picks the length
# Where RFC 6052 puts the IPv4 address (byte slices of the IPv6 one, skipping byte 8) for
# each prefix length a local NAT64 may use; the bot cannot know which one the site chose.
NAT64_LAYOUTS = ((slice(6, 8), slice(9, 11)), (slice(7, 8), slice(9, 12)),
                 (slice(9, 13),), (slice(12, 16),))  # fmt: skip


def carried_ipv4(address: Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address reaches: IPv4-mapped (::ffff:0:0/96), 6to4
    (2002::/16), Teredo (2001::/32: its server and its client) and NAT64 (64:ff9b::/96;
    64:ff9b:1::/48 read every way it may be laid out). Empty for any other address."""
    if not isinstance(address, ipaddress.IPv6Address):
        return ()
    if address.ipv4_mapped:
        return (address.ipv4_mapped,)
    if address.sixtofour:
        return (address.sixtofour,)
    if address.teredo:
        return address.teredo
    packed = address.packed
    if address in NAT64:
        return (ipaddress.IPv4Address(packed[12:]),)
    if address in NAT64_LOCAL:
        layouts = (b"".join(packed[part] for part in parts) for parts in NAT64_LAYOUTS)
        return tuple(ipaddress.IPv4Address(raw) for raw in layouts)
    return ()


@dataclass(frozen=True)
class FetchRules:
    """What a repository fetch may reach and take in."""

    allowed: tuple[Network, ...] = ()  # private addresses allowed anyway (a git server inside)
    max_bytes: int = REPO_MAX_BYTES  # the checkout, .git included, at most
    resolve: Resolver = system_resolve
    timeout_s: float = RESOLVE_TIMEOUT_S
    ports: frozenset[int] = ALLOWED_PORTS

    def permits(self, address: Address) -> bool:
        """Public, or allowed: the address itself, or each IPv4 address it carries."""
        if self._allowed(address):
            return True
        reached = carried_ipv4(address) or (address,)
        return all(_is_public(a) or self._allowed(a) for a in reached)

    def _allowed(self, address: Address) -> bool:
        return any(address in net for net in self.allowed)


def check_port(url: str, rules: FetchRules) -> int:
    """The URL's port (its scheme's default when it names none), if the rules allow it."""
    parts = urlsplit(url)
    try:
        port = parts.port or DEFAULT_PORTS.get(parts.scheme, 443)
    except ValueError:
        raise RepoRefused("the repository URL's port is not a number from 0 to 65535") from None
    if port not in rules.ports:
        allowed = ", ".join(str(p) for p in sorted(rules.ports))
        raise RepoRefused(f"port {port} is not allowed for repositories here (only {allowed})")
    return port


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
    host = urlsplit(url).hostname or ""
    port = check_port(url, rules)
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
