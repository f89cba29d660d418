"""The configuration layer: disque.conf, the command line, CONFIG GET,
SET and REWRITE.

    directives.py  the one table of directives: kind, default, flags, effects
    kinds.py       how a directive's words are parsed, shown and written back
    parse.py       the words of a line: quotes, escapes, numbers, memory sizes
    loader.py      a file, its includes and the command line, in order
    settings.py    Config: every directive as a typed attribute; GET and SET
    rewrite.py     CONFIG REWRITE

The rest of the server reads its settings from a Config's attributes
(config.cluster_node_timeout), and follows the ones CONFIG SET may change
with Config.on_change.
"""

from disque_py.config.settings import Config

__all__ = ["Config"]
