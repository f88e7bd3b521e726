"""``python -m builder``."""

from builder.cli import main

main()
