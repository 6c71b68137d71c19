"""No network for model-written code in a Buddy sandbox (unless SANDBOX_NETWORK=on).

A Buddy sandbox is a VM on the internet, so a file with hidden instructions could have the
model send data out. Each snippet and the Python kernel therefore run in a network
namespace of their own, which holds only a loopback interface that is down:
`unshare --user --map-root-user --net` (util-linux) makes it without root, through an
unprivileged user namespace. First boot and setup commands keep the network.

Model code also sees /home and the sandbox user's home read-only, no /run, and its work
folder as a mount point (`offline`), so that it cannot leave behind what a later command
of the bot's would run outside the namespace, nor reach services outside it.

The first boot checks that this works for the user commands run as, lifting Ubuntu
24.04's AppArmor restriction on unprivileged user namespaces where it is on (it needs
root, which first boot has or gets through sudo); if it still does not work the setup
fails, saying so, rather than run model code with the network.
"""

from __future__ import annotations

import shlex

from bot.sandbox.base import WORK_DIR

RESTRICTION = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
NO_NAMESPACE = (
    "model code cannot get a network namespace of its own here (unshare needs "
    "unprivileged user namespaces); set SANDBOX_NETWORK=on to run it with the network"
)
NO_READ_ONLY = "cannot make the home folders read-only for model code; it does not run"
NO_HIDDEN_RUN = "cannot hide /run from model code; it does not run"
NO_PINNED_WORK = "cannot pin the work folder for model code; it does not run"
# Writable for model code, so never made read-only even if they are someone's home.
KEPT_WRITABLE = ("/", "/buddy", "/buddy/work", "/tmp")
# Runs as root of a first namespace (network, mounts), in the work folder. It binds that
# onto itself (a mount point cannot be moved away and replaced with a link), /home and
# the home folder (its $1) read-only, and hides /run under an empty tmpfs: the sockets of
# services outside the namespace (the user's session bus and systemd manager in
# /run/user, docker's), which a network namespace does not cut off. Then it runs the
# command ("$@" after it) in a namespace nested in that one, where those mounts are
# locked, as the kernel locks what a less privileged mount namespace inherits: model code
# cannot unmount them, move them or make them writable again. The command gets the
# environment without what this bash adds to it.
LOCK_DOWN = f"""h=$1; shift
w=$(pwd -P)
[ "$w" = / ] || /usr/bin/mount --rbind "$w" "$w" && cd "$w" \\
  || {{ echo {shlex.quote(NO_PINNED_WORK)} >&2; exit 126; }}
for d in /home "$h"; do
  case $d in {"|".join(KEPT_WRITABLE)}|"") continue;; esac
  [ -d "$d" ] || continue
  /usr/bin/mount --rbind "$d" "$d" && /usr/bin/mount -o remount,bind,ro,nosuid,nodev "$d" \\
    || {{ echo {shlex.quote(NO_READ_ONLY)} >&2; exit 126; }}
done
if [ -d /run ]; then
  /usr/bin/mount -t tmpfs -o ro,nosuid,nodev,noexec,mode=755 none /run \\
    || {{ echo {shlex.quote(NO_HIDDEN_RUN)} >&2; exit 126; }}
fi
exec /usr/bin/env -u PWD -u OLDPWD -u SHLVL -u _ \\
  /usr/bin/unshare --user --map-root-user --mount -- "$@"
"""


def offline(command: str, home: str = '"$h"') -> str:
    """`command` (a shell command line) run with no network, no /run, and with /home and
    `home` (a shell word: the sandbox user's home folder) read-only. Every shell started at login
    reads files there (~/.profile, ~/.bashrc, ~/.local/bin on the PATH): were they
    writable, model code could plant what a later command of the bot's runs outside."""
    script = shlex.quote(LOCK_DOWN)
    return (
        f"/usr/bin/unshare --user --map-root-user --net --mount -- "
        f"/bin/bash --noprofile --norc -c {script} sci {home} {command}"
    )


def first_boot_check(user_var: str = "u") -> list[str]:
    """First-boot lines that make sure `$user_var` (the user commands run as) can make the
    namespaces, from the work folder as a snippet does; they exit 1 with a message if it
    cannot. Safe under `set -e`."""
    f = RESTRICTION
    return [
        f'if [ "$(cat {f} 2>/dev/null)" = 1 ]; then',
        f"  {{ echo 0 > {f}; }} 2>/dev/null || echo 0 | sudo -n tee {f} >/dev/null || exit 1",
        "fi",
        "n=",
        f'if [ "$(id -u)" = 0 ] && [ "${user_var}" != root ]; then',
        f'  n="runuser -u ${user_var} --"',
        "fi",
        f"( cd {WORK_DIR} && $n {offline('/bin/true', home='/home')} ) 2>/dev/null "
        f"|| {{ echo {shlex.quote(NO_NAMESPACE)} >&2; exit 1; }}",
    ]
