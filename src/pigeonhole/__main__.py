"""`python -m pigeonhole` runs the CLI."""

from __future__ import annotations

from pigeonhole.cli.main import main

if __name__ == "__main__":
    main()
