"""`python -m tracekit` runs the command line."""

import sys

from tracekit.cli import run

if __name__ == "__main__":
    sys.exit(run())
