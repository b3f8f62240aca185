"""Help that teaches: example lines under a subcommand's help, and ``coba train KIND --help`` per kind.

``examples(...)`` builds an epilog that ``ExampleFormatter`` prints line by line (argparse's default
formatter would rewrap it into one paragraph); descriptions still wrap as usual. tests/test_cli_help.py
parses every example line with the real parser, so an example cannot name an option that does not exist.
``command_parser`` reads a command's help, description and examples from its module's docstring, so a command's
user-facing text is written once, at the top of its file.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

EXAMPLES_HEADING = "examples:"


def examples(*lines: str) -> str:
    """An epilog listing example command lines, one per line."""
    return EXAMPLES_HEADING + "\n" + "\n".join(f"  {line}" for line in lines)


def example_lines(parser: argparse.ArgumentParser) -> list[str]:
    """The example command lines of ``parser``'s epilog (empty when it has none)."""
    text = parser.epilog or ""
    if not text.startswith(EXAMPLES_HEADING):
        return []
    return [line.strip() for line in text.splitlines()[1:] if line.strip() and not line.strip().startswith("#")]


def command_parser(subparsers: argparse._SubParsersAction, name: str, module_doc: str | None,
                   **options: object) -> argparse.ArgumentParser:
    """Add subcommand ``name`` whose help is its module's docstring: the first line after "``coba NAME``: " is
    the one-line help, the next paragraph the description, a paragraph headed "examples:" the example lines
    (printed as written); any other paragraph is a note for developers and stays out of ``--help``."""
    head, *paragraphs = (module_doc or "").strip().split("\n\n")
    lines = next((p.splitlines()[1:] for p in paragraphs if p.startswith(EXAMPLES_HEADING)), [])
    description = next((p for p in paragraphs if not p.startswith(EXAMPLES_HEADING)), "")
    return subparsers.add_parser(name, help=head.split(": ", 1)[-1].rstrip("."),
                                 description=" ".join(description.split()), formatter_class=ExampleFormatter,
                                 epilog=examples(*(line.strip() for line in lines)) if lines else None,
                                 **options)


class ExampleFormatter(argparse.HelpFormatter):
    """The default formatter, except that an ``examples:`` epilog keeps its lines as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(EXAMPLES_HEADING):
            return "\n".join(indent + line for line in text.splitlines())
        return super()._fill_text(text, width, indent)


def add_kind_help(parser: argparse.ArgumentParser, kinds: Mapping[str, tuple[str, str]],
                  only: Mapping[str, tuple[str, ...]]) -> None:
    """Give ``parser`` (made with ``add_help=False``) a ``-h/--help`` that, after a KIND positional, shows that
    kind's description and examples and hides the options of other kinds.

    ``kinds``: kind -> (description, examples epilog). ``only``: kind -> dests of the options only it takes.
    """

    class KindHelp(argparse.Action):
        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                     option_string: str | None = None) -> None:
            kind = getattr(namespace, "kind", None)
            if kind in kinds:
                hidden = {dest for other, dests in only.items() if other != kind for dest in dests}
                for action in parser._actions:  # the process exits right after printing
                    if action.dest in hidden or action.dest == "kind":
                        action.help = argparse.SUPPRESS
                parser.prog = f"{parser.prog} {kind}"
                parser.usage = f"{parser.prog} [options]"
                parser.description, parser.epilog = kinds[kind]
            parser.print_help()
            parser.exit()

    parser.add_argument("-h", "--help", action=KindHelp, nargs=0,
                        help="show this help and exit; after KIND (coba train mlp --help) only that kind's options")
