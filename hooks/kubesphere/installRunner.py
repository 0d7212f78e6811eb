#!/usr/bin/env python3
"""shell-operator hook for the ClusterConfiguration; the engine lives in the ``installer`` package.

The run goes to the warm engine of this hook's shell-operator when one listens (installer.launch.warm_client: the
hook imports only the standard library then), else runs here."""

import sys

from installer.launch.warm_client import main

if __name__ == "__main__":
    main(sys.argv[1:])
