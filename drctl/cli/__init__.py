"""The command line: the only part of drctl that imports Typer."""
