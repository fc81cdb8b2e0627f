"""``netpeer``: the command line for people and scripts. Parsing and the
errors are here; each noun's parsers and handler are in its own module
(networks.py, peerings.py, tokens.py, site.py, server.py), and other packages
contribute nouns (``netpeer dev``: commands.py).

Errors end the command with a non-zero exit and one line on stderr; never a
traceback (set NETPEER_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from netpeer import errors
from netpeer.cli import commands, networks, peerings, server, site, tokens
from netpeer.cli.context import Context, global_options

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_PIPE = 141   # the output's reader went away (as a shell reports a death by SIGPIPE)

#: netpeer's own nouns, in the order of `netpeer --help` (after the contributed ones).
OWN = (*server.COMMANDS, site.COMMAND, tokens.COMMAND, networks.COMMAND, peerings.COMMAND)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, like every other error
        sys.stderr.write(f"error: {self.prog}: {message}\n")
        sys.exit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    return _build()[0]


def _build() -> tuple[argparse.ArgumentParser, dict[str, commands.Command]]:
    """The parser, and the command of each noun."""
    g = global_options()
    p = _Parser(prog="netpeer", parents=[g], description="Mutually consented network peerings on OVN.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    by_noun: dict[str, commands.Command] = {}
    for command in (*commands.contributed(), *OWN):
        if command.noun in by_noun:
            raise TypeError(f"two commands named {command.noun}")
        command.add_parser(sub, g, _Parser)
        by_noun[command.noun] = command
    return p, by_noun


def run(args: argparse.Namespace, by_noun: dict[str, commands.Command]) -> int:
    command = by_noun.get(args.command)
    if command is None:
        raise errors.InvalidArgument.for_field("command", args.command, "is not known")
    return command.run(Context(args), args)


def main(argv: Sequence[str] | None = None) -> int:
    parser, by_noun = _build()
    args = parser.parse_args(argv)
    try:
        code = run(args, by_noun)
        sys.stdout.flush()   # here, where a reader that went away is handled, not at exit
        return code
    except BrokenPipeError:
        # The reader of the output went away (`netpeer ... | head`): nothing is wrong and nobody is
        # left to tell. What is still buffered goes nowhere, so that the exit does not fail on it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_PIPE
    except errors.NetpeerError as exc:
        # The request id where the service failed, not the user: it finds the call in netpeerd's log.
        blame = type(exc) in (errors.Unavailable, errors.NetpeerError) and exc.request_id
        sys.stderr.write(f"error: {exc.line()}" + (f" (request id {exc.request_id})" if blame else "") + "\n")
        for other in getattr(exc, "violations", ())[1:]:   # every invalid field of the request, one a line
            sys.stderr.write(f"error: {other.line()}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 130
    except Exception as exc:  # never a traceback for users
        if os.environ.get("NETPEER_DEBUG"):
            raise
        sys.stderr.write(f"error: {exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                         " (set NETPEER_DEBUG=1 for details)\n")
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
