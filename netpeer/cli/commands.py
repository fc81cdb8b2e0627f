"""The nouns of ``netpeer`` and where they come from: netpeer's own
(``netpeer.cli.main``) and those other installed packages contribute through
the entry point group ``netpeer.cli_commands`` (the dev tools' ``netpeer dev``:
netpeer never imports them)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable

from netpeer import errors

#: Entry points of this group name a :class:`Command`; the entry point's name is its noun.
GROUP = "netpeer.cli_commands"

#: The nouns another package contributes, and what to install when it is missing.
OPTIONAL = {"dev": "the dev tools (netpeer_dev) are not installed: run `pip install -e .` in netpeer's source tree"}


@dataclass(frozen=True)
class Command:
    """One noun of the command line. ``add_parser(subparsers, globals,
    parser_class)`` adds its parser (``globals``: the parent parser of the
    global options; ``parser_class``: what its own subparsers must use, for
    one-line usage errors); ``run(ctx, args)`` runs what was parsed and
    returns the exit code (``ctx``: a :class:`netpeer.cli.context.Context`)."""

    noun: str
    add_parser: Callable[[Any, argparse.ArgumentParser, type], None]
    run: Callable[[Any, argparse.Namespace], int]


def contributed() -> list[Command]:
    """The commands installed packages contribute, by noun; a noun whose
    package cannot be imported is a :func:`missing` one, saying so."""
    found: dict[str, Command] = {}
    for entry in metadata.entry_points(group=GROUP):
        try:
            command = entry.load()
        except ImportError as exc:
            found[entry.name] = missing(entry.name, f"{exc}")
            continue
        if not isinstance(command, Command) or command.noun != entry.name:
            raise TypeError(f"entry point {entry.name} = {entry.value} of {GROUP} is not a Command named {entry.name}")
        found[entry.name] = command
    for noun in OPTIONAL:
        found.setdefault(noun, missing(noun, ""))
    return [found[noun] for noun in sorted(found)]


def missing(noun: str, why: str) -> Command:
    """A stand-in for a contributed noun that is not installed: it accepts any
    words and says in one line what to install."""

    def add_parser(sub, g, parser_class) -> None:
        p = sub.add_parser(noun, help=f"not installed: {OPTIONAL.get(noun, 'its package cannot be imported')}")
        p.add_argument("words", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    def run(ctx, args) -> int:
        hint = OPTIONAL.get(noun, "its package cannot be imported")
        raise errors.FailedPrecondition(f"netpeer {noun}: {hint}" + (f" ({why})" if why else ""))

    return Command(noun, add_parser, run)
