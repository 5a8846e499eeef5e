"""The ``distrepro`` entry point: the parser, and :func:`main`, which turns whatever goes wrong into one line."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

from distrepro.errors import DistreproError, describe_unexpected
from distrepro.tracking.open_runs import note_exit

_VERSION_HELP = "show program's version number and exit"
_DEBUG_HELP = "print the traceback of an error before its one-line message (also DISTREPRO_DEBUG=1)"


def _version() -> str:
    """The installed distribution's version (what pip/uv report), else the package's own."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("distrepro")
    except PackageNotFoundError:
        import distrepro

        return distrepro.__version__


class _LazyVersion(argparse.Action):
    """``--version``, looked up only when it is asked for: argparse's own action takes the text when the parser is
    built, and finding the installed distribution (``importlib.metadata`` and a scan of every path entry, about
    20 ms of CPU) was then paid by every command, twice by a watched ``run`` (the watcher and its child)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        del kwargs
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=_VERSION_HELP)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(f"distrepro {_version()}")
        parser.exit()


def _roots_parser() -> argparse.ArgumentParser:
    """``--root`` and ``--debug``, shared by every command (a parent parser, so they go after the command)."""
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: not given after the command, it keeps the value given before it (``distrepro --debug run``)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
    common.add_argument(
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="a line at every evaluation of every run (default: each run's last; a live bar on a terminal)",
    )
    common.add_argument(
        "--root",
        action="append",
        metavar="DIR",
        help="a folder with your own methods/, datasets/, hardware_profiles/, configs/, looked up beside the "
        "shipped ones (repeatable; also DISTREPRO_PATH, separated by os.pathsep)",
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    """The ``distrepro`` parser: one subcommand per module of this package."""
    from distrepro.cli import calibrate, listing, plan, preregister, report, reproduce, results, run, test, ui

    parser = argparse.ArgumentParser(
        prog="distrepro",
        description="Reproduce distributed-training papers on emulated heterogeneous hardware.",
        allow_abbrev=False,
    )
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    parser.add_argument("--version", action=_LazyVersion)
    sub = parser.add_subparsers(dest="command", required=True)
    common = [_roots_parser()]  # every command looks plugins up, so every command takes --root
    run.add_parser(sub, common)
    reproduce.add_parser(sub, common)
    plan.add_parser(sub, common)
    preregister.add_parser(sub, common)
    listing.add_parser(sub, common)
    test.add_parser(sub, common)
    report.add_parser(sub, common)
    results.add_parser(sub, common)
    calibrate.add_parser(sub, common)
    ui.add_parser(sub, common)
    for command in sub.choices.values():  # a flag is spelled whole: `--seed 0` must not be read as `--seeds 0`
        command.allow_abbrev = False
    return parser


def _degrade_unencodable_output() -> None:
    """A character the terminal cannot encode (``LC_ALL=POSIX``, ``PYTHONIOENCODING=ascii``: the reports' ×, ², —)
    becomes ``?`` instead of ending a finished campaign with ``UnicodeEncodeError`` and exit 1."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and (stream.encoding or "").lower().replace("-", "") != "utf8":
            reconfigure(errors="replace")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Whatever goes wrong is one line on stderr, never a traceback unless ``--debug``: a
    user error (exit 2), Ctrl-C or SIGTERM (128 + the signal: runs KILLED, a resume hint), a bug (exit 1).

    From the command line (``argv`` None), ``run`` and ``reproduce`` run in a child process this one watches
    (:mod:`distrepro.cli.watch`): a child that vanishes still has its runs closed and its end said."""
    from distrepro.cli.watch import child_start, run_watched, wants_watch

    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    _degrade_unencodable_output()
    command_line = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        os.getcwd()
    except FileNotFoundError:  # torch's MKL then ended the command with "oneMKL FATAL ERROR" and exit 2
        return _fail("distrepro: error: the working folder was deleted: cd to a folder that exists", 2, False)
    if command_line and wants_watch(args.command):  # trains here: a child does it, watched (:mod:`.watch`)
        return run_watched(argv)
    child_start()
    try:
        status = _run(args, argv)
    except SystemExit as exc:  # still Python's exit (its finally blocks ran): not a process that vanished
        note_exit(exc.code if isinstance(exc.code, int) else int(exc.code is not None))
        raise
    except BaseException:
        note_exit(1)
        raise
    note_exit(status)
    return status


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    from distrepro.orchestration.interrupts import exit_status, interrupted_line, termination_as_interrupt

    debug = bool(getattr(args, "debug", False) or os.environ.get("DISTREPRO_DEBUG"))
    if getattr(args, "verbose", False):
        os.environ["DISTREPRO_VERBOSE"] = "1"  # workers, ranks and SLURM jobs inherit it
    if debug:
        os.environ["DISTREPRO_DEBUG"] = "1"  # the distributed engine's ranks and launcher say more too
    with termination_as_interrupt():  # SIGTERM (SLURM, timeout) takes Ctrl-C's path below
        try:
            if args.root:
                from distrepro.plugins.roots import add_roots

                add_roots(args.root)
            return int(args.func(args))
        except DistreproError as exc:
            return _fail(f"distrepro: error: {exc}", 2, debug)
        except KeyboardInterrupt as exc:
            return _fail(interrupted_line(exc, [a for a in argv if a != "--debug"]), exit_status(exc), debug)
        except BrokenPipeError as exc:
            if not _stdout_closed():  # a pipe other than our output (a socket to a store): a real error
                return _fail(f"distrepro: error: {describe_unexpected(exc)}", 1, debug)
            # ``distrepro list | head``: the reader has what it wanted and left; nobody is there to be told
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's exit flush must not fail
            return 0
        except Exception as exc:
            from distrepro.plugins.crash_site import plugin_frame

            return _fail(f"distrepro: error: {describe_unexpected(exc, plugin_frame(exc))}", 1, debug)
        finally:
            drop_exit_hooks()  # torch may have been imported by the command


def drop_exit_hooks() -> None:
    """torch's dynamo registers an exit hook that formats its compile times with ``tabulate`` (imported then:
    0.3 s of CPU at every exit) even when nothing was compiled and its log is off; distrepro compiles nothing."""
    import atexit

    dynamo = sys.modules.get("torch._dynamo.utils")
    hook = getattr(dynamo, "dump_compile_times", None)
    if hook is not None:
        atexit.unregister(hook)


def _stdout_closed() -> bool:
    """Whether our standard output is a pipe whose reader has gone (poll says POLLERR on such a pipe)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no fileno (captured), or no poll on this platform
        return False


def _fail(line: str, status: int, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    print(line, file=sys.stderr, flush=True)
    return status
