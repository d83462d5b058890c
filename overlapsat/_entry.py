"""The `overlapsat` command's entry point: Ctrl-C while the command line is still loading is an interrupt
like any other (exit 130, one line, nothing written), not a traceback."""

import sys
import time

STARTED = time.monotonic()  # the command's time limit counts from here, its imports included


def main() -> int:
    try:
        from overlapsat import _process

        _process.defer_or_tools = True  # this limit counts from the start: OR-Tools loads when a search needs it
        from overlapsat.cli import main as cli_main
    except KeyboardInterrupt:
        print("overlapsat: interrupted while starting: nothing written", file=sys.stderr)
        return 130
    try:
        return cli_main(started=STARTED)  # which reports its own interrupts, all but in its first and last lines
    except KeyboardInterrupt:
        print("overlapsat: interrupted as the command began or ended: each output file is whole or absent",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
