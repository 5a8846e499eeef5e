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


SCALES = ("proxy", "mid", "gpu", "paper")


def _list_papers() -> None:
    """``distrepro reproduce <paper id>`` targets, each with its arms (optional ones marked) grouped by the scales
    they run at (an arm runs at a scale when its config has that scale's sibling file). A copy of the template
    whose citation is still the template's placeholder is left out, in one line saying where it is."""
    from distrepro.claims.papers import arms_at_scale, find_paper, known_papers

    print("papers (distrepro reproduce PAPER [--scale S]; * = optional arm, run with --with):")
    placeholder = _template_citation()
    left_out = []
    for paper in known_papers():
        try:
            info = find_paper(paper)
        except DistreproError as exc:
            print(f"  {paper:<14} INVALID: {exc}")
            continue
        if placeholder is not None and (paper, info.title) == placeholder:
            left_out.append(str(info.path))
            continue
        arms = info.spec.setup.arms if info.spec is not None else {}
        at = {scale: arms_at_scale(info, scale) for scale in SCALES}
        groups: dict[str, list[str]] = {}
        for name, arm in arms.items():
            where = " ".join(s for s in SCALES if name in at[s]) or "no config found"
            groups.setdefault(where, []).append(f"{name}*" if arm.optional else name)
        print(f"  {paper:<14} {info.title}")
        print(f"{' ' * 17}{len(arms)} arms, by the scales each runs at:")
        for where, names in groups.items():
            wrap = textwrap.TextWrapper(
                110, initial_indent=" " * 19, subsequent_indent=" " * 21, break_on_hyphens=False
            )
            print(wrap.fill(f"{where}: {', '.join(names)}"))
    for path in left_out:
        print(f"  (not listed: {path} still has the template's citation; give it your paper's id and title)")


def _template_citation() -> tuple[str, str] | None:
    """(id, title) of the template's placeholder citation (``methods/_template/paper.yaml``), None without it."""
    from distrepro.plugins.roots import shipped_root
    from distrepro.safe_yaml import read_yaml_mapping

    try:
        cite = read_yaml_mapping(shipped_root() / "methods" / "_template" / "paper.yaml").get("citation") or {}
    except DistreproError:
        return None
    return (str(cite.get("id")), str(cite.get("title"))) if isinstance(cite, dict) else None


def add_parser(sub: argparse._SubParsersAction, common: list[argparse.ArgumentParser]) -> None:
    """The ``list`` subcommand."""
    lst = sub.add_parser(
        "list", parents=common, help="list the papers (with their arms), methods, datasets and hardware profiles"
    )
    lst.set_defaults(func=_cmd_list)
