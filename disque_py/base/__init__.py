"""The base layer: what every other layer may use, and which uses nothing
of the package.

    errors.py       the error classes, each with the RESP prefix clients match
    replies.py      every text a client reads in an error reply
    effects.py      what the node asks the server to do (its outbox's items)
    log.py          the server log, in Disque's format
    clock.py        the time the node reads, real or fake
    scantable.py    a partitioned dict, for stateless SCAN cursors
    globmatch.py    Redis's glob rules
    splitargs.py    a config or inline command line split into words
    disk_faults.py  the seam tests inject disk failures through
"""
