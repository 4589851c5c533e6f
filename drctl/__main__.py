from drctl.cli.app import run

run()
