"""``distrepro list``: the papers (with their arms), methods, datasets and hardware profiles."""

from __future__ import annotations

import argparse
import textwrap

from distrepro.errors import DistreproError


def _cmd_list(args: argparse.Namespace) -> int:
    from distrepro.plugins import registry, roots

    _list_papers()
    print("methods:")
    for name, plugin in sorted(registry.methods().items()):
        cite = plugin.paper.get("citation", {})
        kind = plugin.paper.get("kind", "-")
        mode = "lockstep" if plugin.cls.synchronous else "asynchronous"
        print(f"  {name:<14} {kind:<13} {mode:<13} {cite.get('title', '')} ({cite.get('venue', '')})")
    print("datasets:")
    for name, module in sorted(registry.datasets().items()):
        print(f"  {name:<14} {getattr(module, 'DESCRIPTION', '')}")
    print("hardware profiles:")
    from distrepro.hardware.profiles import load_profile

    for name in roots.profile_names():
        try:
            prof = load_profile(name)
            print(f"  {name:<20} {prof.world_size:>3} workers  {prof.description}")
        except DistreproError as exc:
            print(f"  {name:<20} INVALID: {exc}")
    failed = registry.failed_plugins()
    if failed:
        print("plugins that failed to load:")
        for f in failed:
            print(f"  {f.kind} {f.name} ({f.path}): {f.error}")
    return 0


def _list_papers() -> None:
    """``distrepro reproduce <paper id>`` targets, each with its arms (optional ones marked)."""
    from distrepro.claims.papers import find_paper, known_papers

    print("papers (distrepro reproduce PAPER; * = optional arm, run with --with):")
    for paper in known_papers():
        try:
            info = find_paper(paper)
        except DistreproError as exc:
            print(f"  {paper:<14} INVALID: {exc}")
            continue
        arms = info.spec.setup.arms if info.spec is not None else {}
        names = [f"{n}*" if a.optional else n for n, a in arms.items()]
        print(f"  {paper:<14} {info.title}")
        arms_text = f"{len(names)} arms: {', '.join(names) or '-'}"
        wrap = textwrap.TextWrapper(110, initial_indent=" " * 17, subsequent_indent=" " * 19, break_on_hyphens=False)
        print(wrap.fill(arms_text))


def add_parser(sub: argparse._SubParsersAction, common: list[argparse.ArgumentParser]) -> None:
    """The ``list`` subcommand."""
    lst = sub.add_parser(
        "list", parents=common, help="list the papers (with their arms), methods, datasets and hardware profiles"
    )
    lst.set_defaults(func=_cmd_list)
