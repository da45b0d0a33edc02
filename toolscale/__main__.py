"""`python -m toolscale` runs the CLI."""

from toolscale.cli import main

main()
