"""Typed errors of the phase compiler."""

from __future__ import annotations

from dataclasses import dataclass

from agentledger.errors import InvalidInput

__all__ = ["InputIssue", "PhaseInputError"]


@dataclass(frozen=True)
class InputIssue:
    """One violation: where it is (``sources.sandbox.authority.network.egress[2]``) and why."""

    path: str
    message: str
    kind: str

    def describe(self) -> str:
        return f"{self.path or '(top level)'}: {self.message}"


class PhaseInputError(InvalidInput):
    """A phase contract (compiler input, profile, intent, evidence) failed strict validation.

    ``path`` names the first offending location, in the notation
    ``key.key[index]`` (dimension keys such as ``network.egress`` appear as written);
    ``issues`` lists every violation found. The CLI maps it to exit code 65.
    """

    code = "invalid-phase-input"

    def __init__(self, contract: str, issues: list[InputIssue]) -> None:
        if not issues:
            raise ValueError("PhaseInputError needs at least one issue")
        self.contract = contract
        self.issues = tuple(issues)
        first = issues[0]
        more = f" (and {len(issues) - 1} more)" if len(issues) > 1 else ""
        super().__init__(f"invalid {contract} at {first.describe()}{more}")

    @property
    def path(self) -> str:
        return self.issues[0].path
