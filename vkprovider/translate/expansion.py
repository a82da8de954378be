"""``$(VAR)`` expansion exactly as the kubelet does it (third_party/forked/golang/expansion).

``$(NAME)`` becomes the value if NAME is defined, otherwise stays literally ``$(NAME)``; ``$$``
is an escaped ``$``; an unterminated ``$(`` and a ``$`` before any other character stay as-is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


def mapping_for(*contexts: Mapping[str, str]) -> Callable[[str], str]:
    """Look a name up in each context in turn; unknown names expand to themselves."""

    def lookup(name: str) -> str:
        for context in contexts:
            if name in context:
                return context[name]
        return f"$({name})"

    return lookup


def _read_name(rest: str) -> tuple[str, bool, int]:
    """Port of ``tryReadVariableName``: (text, is_variable, characters consumed)."""
    if rest[0] == "$":
        return "$", False, 1
    if rest[0] == "(":
        end = rest.find(")", 1)
        if end != -1:
            return rest[1:end], True, end + 1
        return "$(", False, 1
    return "$" + rest[0], False, 1


def expand(value: str, lookup: Callable[[str], str]) -> str:
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    while cursor < len(value):
        if value[cursor] == "$" and cursor + 1 < len(value):
            out.append(value[checkpoint:cursor])
            read, is_var, advance = _read_name(value[cursor + 1 :])
            out.append(lookup(read) if is_var else read)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(value[checkpoint:])
    return "".join(out)
