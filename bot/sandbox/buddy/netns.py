"""No network for model-written code in a Buddy sandbox (unless SANDBOX_NETWORK=on).

A Buddy sandbox is a VM on the internet, so a file with hidden instructions could have the
model send data out. Each snippet and the Python kernel therefore run in a network
namespace of their own, which holds only a loopback interface that is down:
`unshare --user --map-root-user --net` (util-linux) makes it without root, through an
unprivileged user namespace. First boot and setup commands keep the network.

The first boot checks that this works for the user commands run as, lifting Ubuntu
24.04's AppArmor restriction on unprivileged user namespaces where it is on (it needs
root, which first boot has or gets through sudo); if it still does not work the setup
fails, saying so, rather than run model code with the network.
"""

from __future__ import annotations

import shlex

UNSHARE = "unshare --user --map-root-user --net --"
RESTRICTION = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
NO_NAMESPACE = (
    "model code cannot get a network namespace of its own here (unshare needs "
    "unprivileged user namespaces); set SANDBOX_NETWORK=on to run it with the network"
)


def offline(command: str) -> str:
    """`command` (a shell command line) run with no network."""
    return f"{UNSHARE} {command}"


def first_boot_check(user_var: str = "u") -> list[str]:
    """First-boot lines that make sure `$user_var` (the user commands run as) can make the
    namespace; they exit 1 with a message if it cannot. Safe under `set -e`."""
    f = RESTRICTION
    return [
        f'if [ "$(cat {f} 2>/dev/null)" = 1 ]; then',
        f"  {{ echo 0 > {f}; }} 2>/dev/null || echo 0 | sudo -n tee {f} >/dev/null || exit 1",
        "fi",
        f"n='{UNSHARE} true'",
        f'if [ "$(id -u)" = 0 ] && [ "${user_var}" != root ]; then',
        f'  n="runuser -u ${user_var} -- $n"',
        "fi",
        f"$n 2>/dev/null || {{ echo {shlex.quote(NO_NAMESPACE)} >&2; exit 1; }}",
    ]
