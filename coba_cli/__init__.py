"""The ``coba`` command line: parses arguments and calls the layers below; holds no logic of its own."""
