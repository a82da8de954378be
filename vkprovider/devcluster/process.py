"""Start and stop control-plane processes by PID, each with its own log file.

Processes run in their own session so that ``make cluster-up`` can exit and leave them
running; their PIDs are recorded so ``cluster-down`` (or the next ``up``) stops exactly them.
A PID is only signalled if it is still the process we started: same start time (recorded at
spawn) and a command line naming the binary. The binary alone is not enough: every cluster on
the machine runs the same kube-apiserver, and PIDs wrap (``pid_max`` is often 32768), so a
stale state file or a twice-stopped ``Process`` could otherwise SIGTERM another run's apiserver.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

#: Popen objects of the children this process started, kept so they are reaped, not leaked.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class StartupError(RuntimeError):
    """A component did not come up; the message says which, why, and where its log is."""


#: Ports handed out below the kernel's ephemeral range. Asking the kernel for port 0 and passing
#: the number to a child is racy twice over: the number comes from the ephemeral range, where
#: any outgoing connection on the machine (a test client, a watch) may take it before the child
#: binds, and a parallel test worker may be handed the same number (CI saw kube-scheduler die
#: with "bind: address already in use" on 127.0.0.1:37127). Below the range no outgoing
#: connection lands; a claim file per port keeps our own processes apart.
_PORT_FLOOR = 20000


def _ephemeral_floor() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return max(low, _PORT_FLOOR + 1000)


def _claims_dir() -> Path:
    base = os.environ.get("VKPROVIDER_CACHE") or str(Path.home() / ".cache" / "vkprovider")
    path = Path(base) / "ports"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _claim(port: int) -> bool:
    """Claim ``port`` for this process, or say another live process holds it.

    A claim is a file naming the claiming PID and that PID's start time; a claim whose process is
    gone (or is a different process with a recycled PID) is taken over."""
    path = _claims_dir() / str(port)
    me = f"{os.getpid()} {start_time(os.getpid())}"
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid_text, _, started = path.read_text().partition(" ")
                pid = int(pid_text)
            except (OSError, ValueError):
                pid, started = 0, ""
            if pid == os.getpid():
                return False  # handed out before by this process: still in use
            if pid and str(start_time(pid)) == started.strip():
                return False
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            continue
        with os.fdopen(fd, "w") as handle:
            handle.write(me)
        return True
    return False


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on and no other caller has been given.

    Chosen at random below the kernel's ephemeral range and claimed across processes (see
    ``_PORT_FLOOR``), so the child that binds it later cannot lose it to an outgoing connection
    or to another test worker's cluster."""
    ceiling = _ephemeral_floor()
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(_PORT_FLOOR, ceiling)
        if _bindable(port) and _claim(port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # a crowded machine: old way
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ensure_port_free(port: int, component: str) -> None:
    """Fail with a clear message if something *listens* on ``port``.

    ``SO_REUSEADDR`` as every server here sets it: without it the bind also trips over the
    TIME_WAIT sockets a just-stopped server leaves for a minute, though the port is usable."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            raise StartupError(
                f"{component}: port 127.0.0.1:{port} is already in use; stop whatever listens there "
                f"(`ss -ltnp 'sport = :{port}'`) or let the cluster pick free ports"
            ) from None


#: How a Go program's crash starts; the stack under it is often longer than any tail, and the
#: bottom of a stack (``main.main``) does not say what went wrong.
_GO_CRASH_PREFIXES = ("panic:", "fatal error:")


def last_go_crash(lines: list[str]) -> int | None:
    """The index of the line that starts the last Go crash in ``lines`` (its header), or None."""
    return max((i for i, line in enumerate(lines) if line.startswith(_GO_CRASH_PREFIXES)), default=None)


def log_tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` of a log, led by the header of the last Go crash in it when the tail
    alone would cut it off (CI once showed only the bottom of kwok's stack)."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return "(no log)"
    tail = text[-lines:]
    crash_at = last_go_crash(text)
    if crash_at is not None and crash_at < len(text) - lines:
        header = text[crash_at : min(crash_at + 5, len(text) - lines)]
        return "\n".join([*header, "[…]", *tail])
    return "\n".join(tail)


@dataclass
class Process:
    name: str
    pid: int
    binary: str
    log: Path
    #: start time of the PID (``/proc/<pid>/stat`` field 22); None in old state files
    started: int | None = None

    def alive(self) -> bool:
        """True if the PID is still the process we started (zombies count as dead)."""
        child = _CHILDREN.get(self.pid)
        if child is not None:
            return child.poll() is None
        try:
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
            status = Path(f"/proc/{self.pid}/status").read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            return False
        if "\nState:\tZ" in status:
            return False
        if self.started is not None and start_time(self.pid) != self.started:
            return False  # the PID was recycled
        argv0 = cmdline.split(b"\0", 1)[0].decode(errors="replace")
        return argv0 in ("", self.binary)  # empty while the kernel is mid-exec

    def exit_reason(self) -> str:
        return f"{self.name} exited during start-up; last lines of {self.log}:\n{log_tail(self.log)}"

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, wait up to ``grace`` seconds, then SIGKILL; reaps the child if it is ours."""
        if not self.alive():
            self._reap()
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            self._reap()
            if not self.alive():
                return
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        for _ in range(100):
            self._reap()
            if not self.alive():
                return
            time.sleep(0.02)

    def _reap(self) -> None:
        child = _CHILDREN.get(self.pid)
        if child is not None:
            if child.poll() is not None:
                del _CHILDREN[self.pid]
            return
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(self.pid, os.WNOHANG)

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "pid": self.pid,
            "binary": self.binary,
            "log": str(self.log),
            "started": self.started,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Process:
        started = data.get("started")
        return cls(
            str(data["name"]),
            int(str(data["pid"])),
            str(data["binary"]),
            Path(str(data["log"])),
            None if started is None else int(str(started)),
        )


def spawn(
    name: str,
    binary: Path,
    args: list[str],
    log_dir: Path,
    env: dict[str, str] | None = None,
    *,
    netns: str | None = None,
) -> Process:
    """Start ``binary`` detached, stdout+stderr appended to ``<log_dir>/<name>.log``.

    ``netns``: inside that network namespace (``ip netns exec`` execs the binary in place, so
    the PID and the command line are the binary's, as ``Process.alive`` expects)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    prefix = ["ip", "netns", "exec", netns] if netns else []
    with log.open("ab") as out:
        popen = subprocess.Popen(
            [*prefix, str(binary), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    _CHILDREN[popen.pid] = popen
    return Process(name, popen.pid, str(binary), log, start_time(popen.pid))


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot: with the PID, it names one process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])
