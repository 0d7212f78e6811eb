#!/usr/bin/env python3
"""shell-operator hook for the ClusterConfiguration; the engine lives in the ``installer`` package."""

import sys

from installer.hook import main

if __name__ == "__main__":
    sys.exit(main())
