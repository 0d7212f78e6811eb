"""``python -m installer``."""

from installer.cli import main
from installer.process_exit import exit_now

exit_now(main())
