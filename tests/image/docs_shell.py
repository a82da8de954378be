"""Run the shell blocks of the docs as written: what an operator copies is what the test runs.

A block is the first fenced ``sh`` block after a heading (``block("deploy.md", "## Install")``),
so editing a command in the docs changes what the test executes. Commands are the block's
logical lines (backslash continuations joined, heredocs kept whole, comments dropped). The only
changes allowed are :class:`Substitution` s, each with its reason, and each must match the block
(a docs edit that removes the substituted text fails the test instead of silently running
something else). ``VAR=$(...)`` assignments are kept for the later commands of the same
:class:`DocShell`, and a command ending in ``&`` runs in the background until :meth:`close`.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_ASSIGN = re.compile(r"^([A-Z_][A-Z0-9_]*)=(.*)$", re.S)
_HEREDOC = re.compile(r"<<-?'?(\w+)'?")


@dataclass(frozen=True)
class Substitution:
    """One change to a documented block, and why the test may make it (the docs' own words:
    "your image", "your apiserver's addresses", "the demo overlay is the same")."""

    old: str
    new: str
    why: str


def block(doc: str, heading: str, nth: int = 0, lang: str = "sh") -> str:
    """The ``nth`` ``lang`` block after the first line that starts with ``heading`` in
    docs/``doc`` (within that section: before the next ``## `` heading)."""
    text = (DOCS / doc).read_text()
    at = text.index(f"\n{heading}") + 1
    end = text.find("\n## ", at)
    section = text[at : end if end > 0 else len(text)]
    blocks = [body for fence, body in _FENCE.findall(section) if fence == lang]
    assert len(blocks) > nth, f"docs/{doc}: no ```{lang} block #{nth} after {heading!r}"
    return str(blocks[nth])


def _strip_comment(line: str) -> str:
    """``cmd  # why`` → ``cmd``; a ``#`` inside quotes stays."""
    for at in (m.start() for m in re.finditer(r"\s#", line)):
        before = line[:at]
        if before.count("'") % 2 == 0 and before.count('"') % 2 == 0:
            return before.rstrip()
    return line


def substitute(text: str, substitutions: list[Substitution]) -> str:
    for sub in substitutions:
        assert sub.old in text, f"the docs no longer say {sub.old!r} (substituted: {sub.why})"
        text = text.replace(sub.old, sub.new)
    return text


def commands(text: str) -> list[str]:
    """The block's commands, one per logical line."""
    lines = text.splitlines()
    found: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        heredoc = _HEREDOC.search(line)
        if heredoc:
            body = [line]
            while i < len(lines):
                body.append(lines[i])
                i += 1
                if lines[i - 1].strip() == heredoc.group(1):
                    break
            found.append("\n".join(body))
            continue
        while line.endswith("\\") and i < len(lines):
            line = line[:-1].rstrip() + " " + lines[i].strip()
            i += 1
        found.append(_strip_comment(line).strip())
    return found


@dataclass
class Ran:
    command: str
    returncode: int
    stdout: str
    stderr: str

    def summary(self) -> str:
        first = (self.stdout.strip() or self.stderr.strip()).splitlines()
        return f"$ {self.command.splitlines()[0]}\n  -> exit {self.returncode}: {first[0] if first else ''}"


@dataclass
class DocShell:
    """bash with the operator's environment (``KUBECONFIG``, ``PATH`` with kubectl), a working
    directory, the variables documented commands assigned, and a record of every command run."""

    cwd: Path
    env: dict[str, str]
    variables: dict[str, str] = field(default_factory=dict)
    ran: list[Ran] = field(default_factory=list)
    background: list[subprocess.Popen[str]] = field(default_factory=list)

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.env, **self.variables}

    def run(self, command: str, *, expect: int | None = 0, timeout: float = 600) -> Ran:
        """Run one documented command; assert its exit code unless ``expect`` is None."""
        if command.endswith("&"):
            process = subprocess.Popen(
                ["bash", "-c", f"exec {command[:-1].strip()}"],
                cwd=self.cwd,
                env=self._env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            self.background.append(process)
            ran = Ran(command, 0, f"started in the background (pid {process.pid})", "")
            self.ran.append(ran)
            return ran
        assigned = _ASSIGN.match(command)
        script = f'printf %s "{assigned.group(2)}"' if assigned else command
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", script],
            cwd=self.cwd,
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        ran = Ran(command, done.returncode, done.stdout, done.stderr)
        self.ran.append(ran)
        if assigned and done.returncode == 0:
            self.variables[assigned.group(1)] = done.stdout.strip()
        if expect is not None:
            assert done.returncode == expect, (
                f"{command}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"
            )
        return ran

    def close(self) -> None:
        """Stop what runs in the background (by its own PID)."""
        for process in self.background:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.background.clear()
