"""The persistence layer: the append-only file.

    aof_format.py  the record format (version 1) and a reader that knows
                   offsets and tells a torn tail from corruption
    aof.py         the writer: group commit, the fsync policies, space
                   reserved ahead, a full or failing disk
    rewrite.py     the rewrite, in slices, while the node serves
    check.py       is a file readable, and where not (`disque-py check-aof`)
    disque_aof.py  Disque 1.0's own AOF, read into this format
    progress.py    how far a long read is, for INFO and check-aof

server/persistence_service.py loads the file at start and carries the
node's AOF effects to the writer.
"""
