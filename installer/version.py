"""The installer's own build version: recorded with each module's state, never part of a module's hash (an
installer upgrade re-runs only the modules whose code or inputs changed)."""

INSTALLER_VERSION = "3.4.1"
