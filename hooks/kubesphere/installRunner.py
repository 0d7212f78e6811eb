#!/usr/bin/env python3
"""shell-operator hook for the ClusterConfiguration; the engine lives in the ``installer`` package."""

from installer.hook import main
from installer.process_exit import exit_now

if __name__ == "__main__":
    exit_now(main())
