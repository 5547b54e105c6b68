"""The `gptlab` command: main (the parser and exit codes) and one module per subcommand,
each with `register(subparsers)` and a `run(args)` that calls the library and prints.
"""
