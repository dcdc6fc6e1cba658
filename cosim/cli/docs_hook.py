"""``hwcosim docs`` and the documentation site's mkdocs hook (``hooks:`` in ``mkdocs.yml``): the
generated pages of :mod:`hwcosim.cosim.flow.docs`, with the command-line reference rendered from
:func:`build_parser`.

It sits in the command line's package because it is the one piece of the docs build that needs the
command line; :mod:`hwcosim.cosim.flow.docs` renders every page and imports nothing above the flow.
"""

from __future__ import annotations

from hwcosim.cosim.cli import build_parser
from hwcosim.cosim.flow import docs

__all__ = ["on_config", "on_files", "register"]


def _first(fn):
    """Run this hook before every plugin's: mkdocstrings keeps only source paths that exist when its
    handler starts, and ``build/api-src`` (made here) does not exist yet in a fresh clone."""
    try:
        from mkdocs.plugins import event_priority
    except ImportError:  # the docs extra is not installed: nothing calls the hooks
        return fn
    return event_priority(100)(fn)


@_first
def on_config(config, **kwargs):
    """mkdocs hook: :func:`hwcosim.cosim.flow.docs.on_config` (the designs' navigation, the API source tree)."""
    return docs.on_config(config, **kwargs)


def on_files(files, config, **kwargs):
    """mkdocs hook: :func:`hwcosim.cosim.flow.docs.on_files` with the ``hwcosim`` parsers."""
    return docs.on_files(files, config, parser=build_parser(), **kwargs)


def _cmd_docs(args) -> int:
    from pathlib import Path

    from hwcosim.models.atomic import write_text
    from hwcosim.models.errors import CheckFailed, UsageError

    if not (args.out or args.readme or args.check):
        raise UsageError("hwcosim docs: give a folder OUT, or --readme / --check")
    if args.readme or args.check:
        same = docs.update_readme(check=args.check)
        if args.check and not same:
            raise CheckFailed("README.md: the designs table is out of date; rewrite it with hwcosim docs --readme")
        print("README.md: designs table " + ("up to date" if same else "rewritten"))
    if args.out:
        for path, text in docs.generated_pages(parser=build_parser()).items():
            write_text(Path(args.out) / path, text + "\n")
            print(f"wrote {Path(args.out) / path}")
    return 0


def register(sub) -> None:
    from hwcosim.cosim.cli.util import command

    command(sub, "docs", _cmd_docs, "the generated documentation pages; the README's designs table", [
        ("out", "folder for the generated Markdown pages", dict(nargs="?", default=None)),
        ("--readme", "rewrite README.md's designs table", True),
        ("--check", "exit 1 if README.md's designs table is out of date", True)],
            description="Write the generated pages (designs, boards, command-line reference) into OUT; --readme "
                        "rewrites the README's designs table from the registry and docs/boards/results.json, --check "
                        "exits 1 when that table is out of date.")
