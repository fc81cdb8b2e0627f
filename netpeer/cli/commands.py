"""The nouns of ``netpeer``: each one's parsers and handler
(``netpeer.cli.main`` puts them together)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable


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

