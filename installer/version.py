"""The installer's own build version: recorded with each module's state, never part of a module's hash (an
installer upgrade re-runs only the modules whose code or inputs changed). Also its image's name, set here only:
the Helm chart's default values, deploy/kubesphere-installer.yaml and ``python -m installer images`` follow it
(tests/unit/test_installer_image_name.py)."""

INSTALLER_VERSION = "3.4.1"
#: The installer's image repository (this project's, not upstream's ``kubesphere/ks-installer``).
INSTALLER_IMAGE_REPOSITORY = "ks-installer-py/ks-installer"
#: The image a release of this installer runs: the repository at the installer's version.
INSTALLER_IMAGE = f"{INSTALLER_IMAGE_REPOSITORY}:{INSTALLER_VERSION}"
