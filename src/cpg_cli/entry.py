"""The ``cpg`` entry point, kept tiny: a Ctrl+C while the command's modules are still being
imported (the first fraction of a second) ends quietly with exit 130, as at any later moment."""

import sys

# Nothing but ``sys`` (loaded before any script runs) is imported here: a Ctrl+C that lands
# while this module loads would otherwise print a traceback no handler can catch yet.


def _interrupt_again(unraisable: "sys.UnraisableHookArgs") -> None:
    """A Ctrl+C that lands in a callback Python cannot raise from (an import lock released
    while a module loads) is not lost, nor printed as a traceback: it is raised again in the
    main thread, where ``main`` turns it into exit 130. It is sent from a thread of its own:
    sent from here, the main thread takes it at once, inside this hook, and an exception
    that leaves a hook is only printed. The thread runs once the main thread lets go of the
    interpreter, after the hook has returned."""
    if not isinstance(unraisable.exc_value, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)
        return
    import _thread

    _thread.start_new_thread(_thread.interrupt_main, ())


def main() -> None:
    sys.unraisablehook = _interrupt_again
    try:
        from cpg_cli.app import main as run

        run()
    except KeyboardInterrupt:
        sys.stderr.write("cpg: interrupted\n")
        raise SystemExit(130) from None
