"""Every command's help ends with real examples: each parses as the command line it shows."""

from __future__ import annotations

import shlex
from collections.abc import Iterator

import click
import pytest

from agentledger.cli.app import cli, load_all

load_all()


def leaf_commands(
    group: click.Group = cli, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from leaf_commands(command, (*path, name))
        else:
            yield (*path, name), command


LEAVES = list(leaf_commands())


def examples(command: click.Command) -> list[str]:
    text = command.help or ""
    assert "Examples:" in text, "no Examples: section"
    tail = text.rsplit("Examples:", 1)[1]
    return [line.strip() for line in tail.splitlines() if line.strip()]


@pytest.mark.parametrize(("path", "command"), LEAVES, ids=[" ".join(p) for p, _ in LEAVES])
def test_help_ends_with_two_or_three_examples_that_parse(
    path: tuple[str, ...], command: click.Command
) -> None:
    lines = examples(command)
    assert 2 <= len(lines) <= 3, lines
    assert any(line.startswith(f"agentledger {' '.join(path)}") or f" {path[-1]}" in line
               for line in lines)  # fmt: skip
    for line in lines:
        words = shlex.split(line.split("  #", 1)[0])
        for start in range(len(words)):  # each `agentledger ...` in a pipeline
            if words[start] != "agentledger":
                continue
            args = words[start + 1 :]
            for stop in ("|", ">", "&&"):
                args = args[: args.index(stop)] if stop in args else args
            parse(args)


def parse(args: list[str]) -> None:
    """Parse without running: every option and argument must be one the command takes."""
    ctx = cli.make_context("agentledger", list(args), resilient_parsing=False)
    group: click.Command = cli
    rest = remaining(ctx)
    while isinstance(group, click.Group) and rest:
        name, command, rest = group.resolve_command(ctx, rest)
        assert command is not None, args
        ctx = command.make_context(name or "", rest, parent=ctx)
        group = command
        rest = remaining(ctx) if isinstance(command, click.Group) else []


def remaining(ctx: click.Context) -> list[str]:
    # click 8.2 keeps the sub-command's words apart (``protected_args`` is deprecated).
    return [*getattr(ctx, "_protected_args", []), *ctx.args]


def test_the_root_help_lists_examples_and_the_exit_codes() -> None:
    text = cli.help or ""
    assert "Examples:" in text and "130 interrupted" in text


def groups(group: click.Group = cli, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield (*path, name)
            yield from groups(command, (*path, name))


GROUPS = list(groups())


@pytest.mark.parametrize("path", GROUPS, ids=[" ".join(p) for p in GROUPS])
def test_every_command_group_shows_examples_that_parse(path: tuple[str, ...]) -> None:
    """`agentledger keys --help` (and the other groups) listed subcommands, no example."""
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    text = command.help or ""
    marker = "Examples:" if "Examples:" in text else "Start with:"  # phase: a guided tour
    assert marker in text, text
    block = text.rsplit(marker, 1)[-1].strip("\n").split("\n\n", 1)[0]  # up to a blank line
    lines = [line.strip() for line in block.splitlines() if line.strip()]
    assert len(lines) >= 2, lines
    for line in lines:
        words = shlex.split(line.split("  ", 1)[0])  # a comment or a description follows
        args = words[1:]
        for stop in ("|", ">", "&&"):
            args = args[: args.index(stop)] if stop in args else args
        parse(args)
