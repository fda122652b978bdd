"""The ``cpg`` entry point, kept tiny: a Ctrl+C while the command's modules are still being
imported (the first fraction of a second) ends quietly with exit 130, as at any later moment."""

import sys

# Nothing but ``sys`` (loaded before any script runs) is imported here: a Ctrl+C that lands
# while this module loads would otherwise print a traceback no handler can catch yet.


def _interrupt_again(unraisable: "sys.UnraisableHookArgs") -> None:
    """A Ctrl+C that lands in a callback Python cannot raise from (an import lock released
    while a module loads) is not lost, nor printed as a traceback: it is raised again in the
    main thread, where ``main`` turns it into exit 130."""
    try:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            import _thread

            _thread.interrupt_main()
            return
        sys.__unraisablehook__(unraisable)
    except BaseException:
        # A hook that raises is itself printed as a traceback ("Exception ignored in
        # sys.unraisablehook"); the interpreter is shutting down (modules torn down), so
        # there is nothing to interrupt any more.
        return


def main() -> None:
    sys.unraisablehook = _interrupt_again
    try:
        from cpg_cli.app import main as run

        run()
    except KeyboardInterrupt:
        sys.stderr.write("cpg: interrupted\n")
        raise SystemExit(130) from None
