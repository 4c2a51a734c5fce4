"""The plan-artifact path rules: one exact repository-relative path, checked, never normalised."""

from __future__ import annotations

from agentledger.phase.jscompat import has_control_characters, js_trim, to_js_string

__all__ = ["SHELL_SYNTAX_CHARACTERS", "is_safe_plan_artifact_path", "unsafe_plan_artifact_reason"]

SHELL_SYNTAX_CHARACTERS = frozenset("<>|;&`$")


def unsafe_plan_artifact_reason(path: str) -> str | None:
    """Why ``path`` may not be the plan artifact, or ``None`` when it is acceptable.

    The checks are the reference's, in its order. A path is rejected, not repaired: a
    leading ``./`` or a doubled slash is an error, never rewritten into something valid.
    """
    path = to_js_string(path)
    if path != js_trim(path):
        return "leading or trailing whitespace"
    if path.startswith("/"):
        return "absolute path"
    # /^[a-z]:/i without the u flag: only ASCII letters fold case, so this is a drive-like
    # prefix (C:, but also a:b), never a non-ASCII letter.
    if len(path) >= 2 and path[0].isascii() and path[0].isalpha() and path[1] == ":":
        return "drive-letter prefix"
    if "\\" in path:
        return "backslash"
    if has_control_characters(path):
        return "control character"
    if any(ch in SHELL_SYNTAX_CHARACTERS for ch in path):
        return "shell syntax"
    for segment in path.split("/"):
        if segment == "":
            return "empty segment"
        if segment in (".", ".."):
            return "dot segment"
    return None


def is_safe_plan_artifact_path(path: str) -> bool:
    """True when ``path`` passes every plan-artifact rule."""
    return unsafe_plan_artifact_reason(path) is None
