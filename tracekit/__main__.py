"""`python -m tracekit` runs the command line."""

from tracekit.cli import app

if __name__ == "__main__":
    app()
