"""The persistence layer: the append-only file.

    aof_format.py  the formats (version 2, the engine's records; version 1,
                   the previous release's) and a reader that knows offsets
                   and tells a torn tail from corruption
    aof.py         the writer: group commit, the fsync policies, space
                   reserved ahead, a full or failing disk
    rewrite.py     the rewrite, in slices, while the node serves
    check.py       is a file readable, and where not (`disque-py check-aof`)
    disque_aof.py  Disque 1.0's own AOF, read into this format
    progress.py    how far a long read is, for INFO and check-aof

server/persistence_service.py loads the file at start and has the writer
write the records the engine notes in the node's AofLog at the end of
each loop turn.
"""
