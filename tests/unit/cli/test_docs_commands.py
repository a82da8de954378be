"""Every ``.venv/bin/vkprovider …`` command in the README and docs parses as written and names
files that exist in a fresh clone (issue 16, item 7): docs that work verbatim."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from vkprovider.cli import build_parser

REPO = Path(__file__).resolve().parents[3]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
COMMAND = re.compile(r"\.venv/bin/vkprovider [^`\n|#]+")
#: What runs inside the service's pod: ``kubectl exec POD -- vkprovider …`` (issue 29).
IN_POD = re.compile(r"exec \S+ -- (vkprovider [^`\n|#]+)")


def documented_commands() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for match in COMMAND.finditer(doc.read_text()):
            found.append((doc.name, match.group(0).strip().replace("[--json]", "--json")))
        for match in IN_POD.finditer(doc.read_text()):
            found.append((doc.name, ".venv/bin/" + match.group(1).strip()))
    return found


def test_the_docs_do_document_commands() -> None:
    assert len(documented_commands()) >= 8


@pytest.mark.parametrize(("doc", "command"), documented_commands())
def test_documented_command_parses_and_its_files_exist(doc: str, command: str) -> None:
    argv = shlex.split(command)[1:]
    args = build_parser().parse_args(argv)  # SystemExit (a failure) on a bad option
    assert args.handler is not None
    for value in argv:
        if value.startswith(("deploy/", "docs/")):
            assert (REPO / value).is_file(), f"{doc}: {command}: {value} does not exist"
