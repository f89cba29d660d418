"""disque-py: a drop-in replacement for Disque 1.0-rc1, in Python."""

__version__ = "0.1.0"

# The Disque release we are a drop-in for; INFO and HELLO report it so that
# clients that check versions keep working.
DISQUE_VERSION = "1.0-rc1"
