# Idempotent producers: ADDJOB ... DEDUP key [WINDOW seconds].
#
# A node remembers, per job made with a DEDUP key, its (queue, key) until
# the key's window ends; an ADDJOB with a remembered pair answers that
# job's ID instead of making a job. The rules it keeps:
#
#   * every node that holds a copy of the job remembers its key (the key
#     travels in the job's options block, options.pxi), and so does the node that
#     received the ADDJOB, even when it keeps no copy;
#   * the pair is the ADDJOB's queue and key, wherever the job moves later
#     (dead-lettered, QREQUEUE TO: the slot keeps the ADDJOB's queue);
#   * two jobs with one pair (a retry that reached a node that knew neither,
#     then copies of both) are both remembered, each until its own window
#     ends: a duplicate gets the one whose window ends last;
#   * a key outlives its job (acked, expired): it lasts its window, which
#     ends at an absolute time (unix ms) every holder agrees on;
#   * an ID is answered only for a job this node saw reach its REPLICATE
#     level (FLAG_CONFIRMED: it made it, or it is acked); a holder with a
#     copy, which knows nothing of the first ADDJOB's fate, first asks the
#     job's holders to confirm their copies, as a first ADDJOB would
#     (REPLJOB flagged MSG_PROMISED, node/replication.py: confirm_copies;
#     it makes no copy where there is none: a node may have collected the
#     job after its ack),
#     and while the first ADDJOB still waits here, the duplicate waits for
#     its outcome;
#   * a key is forgotten before its window ends only when the ADDJOB that
#     made it failed (NOREPL: the job is deleted from every node that may
#     have a copy), so a retry can try again; but a node whose copy was
#     promised to a duplicate (FLAG_PROMISED) keeps the job then;
#   * the table is bounded: dedup-max-keys entries, each counted in
#     used_memory; a full table refuses new keys (ADDJOB gets -OOM, a copy
#     from a peer is kept without its key and counted in `dropped`).
#
# Persistence: a job's LOADJOB record carries its key, so loading the AOF
# remembers it; DEDUP records (a key whose job has no record here, and
# every key at a rewrite) and UNDEDUP records (a failed ADDJOB) carry the
# rest. Expired keys are skipped when loaded.

from disque_py.base.replies import DEDUP_TABLE_FULL


cdef inline DedupSlot* dedup_lookup(NodeCore node, object queue, DedupFields* wanted,
                                    int64_t now) except? NULL:
    """ADDJOB ... DEDUP key at `now`: the slot of the earlier job the pair
    names (dedup_duplicate() says what to answer), or NULL when a job is to
    be made; `wanted` gets the pair's hash. Raises -OOM when a new key
    would not fit."""
    cdef DedupTable table = node.dedup
    cdef DedupSlot* found
    if wanted.hash == 0:
        wanted.hash = dedup_hash(queue, wanted.key, wanted.key_len)
    found = dedup_find(table, queue, wanted.key, wanted.key_len, wanted.hash, now)
    if found == NULL and table._len >= table.max_keys:
        table.refused += 1
        raise OutOfMemoryError(DEDUP_TABLE_FULL % table.max_keys)
    return found


cdef object dedup_duplicate(NodeCore node, DedupSlot* found, object client, int64_t timeout_ms,
                            int64_t repl, int64_t now):
    """A duplicate ADDJOB (REPLICATE `repl`, -1: the default) of the job
    `found` names: None when that job's ID is the answer; else a Waiter:
    `client` parks until the first ADDJOB's outcome while it still waits
    here, or until `repl` (at most the job's own) holders confirm their
    copies (or its own timeout). Raises NOREPL when too few nodes are
    reachable."""
    cdef Job first
    node.dedup.hits += 1
    first = node.jobs.find(found.id)
    if first is None or first.state == ACKED or first.flags & FLAG_CONFIRMED:
        return None
    deadline = now + timeout_ms if timeout_ms else 0
    if first.state == WAIT_REPL:
        return node.hooks.follow_replication(first, client, deadline)
    if repl < 0:
        repl = node.cluster_size if node.cluster_size < MAX_DEFAULT_REPLICATION \
            else MAX_DEFAULT_REPLICATION
    if first.repl < repl:
        repl = first.repl
    if repl <= 1:                          # this copy is all it asks for: keep it
        dedup_promise(node, first)
        return None
    if repl - 1 > node.reachable_peers or repl > PyTuple_GET_SIZE(<object>first.delivered_):
        raise NoReplError(NOT_ENOUGH_NODES)       # too few nodes, or holders, to confirm
    return node.hooks.confirm_copies(first, client, deadline, repl)


cdef DedupFields* dedup_fields_of(Job job, DedupFields* out) noexcept:
    """The job's key as a message carries it (queue NULL: the job's own
    queue), or NULL: it has none."""
    cdef DedupSlot* slot = job.dedup_
    if slot == NULL:
        return NULL
    out.key = slot.key
    out.key_len = slot.key_len
    out.until_ms = slot.until_ms
    out.hash = slot.hash
    if job.queue_ != NULL and _same_name(slot.queue, <object>job.queue_):
        out.queue = NULL
        out.queue_len = 0
    else:
        out.queue = PyBytes_AS_STRING(<object>slot.queue)
        out.queue_len = PyBytes_GET_SIZE(<object>slot.queue)
    return out


cdef int dedup_remember(NodeCore node, Job job, object queue, DedupFields* fields, bint fresh,
                        int64_t now) except -1:
    """Remember the key of `job` for the pair (queue, fields' key), unless
    its window ended by `now`; the job gets the slot. `fresh`: the job was
    just made by this node's ADDJOB (nothing to search for). 1 if
    remembered (0: window ended, or the table is full)."""
    cdef DedupTable table = node.dedup
    cdef int64_t before = table.memory
    cdef DedupSlot* slot
    if fields.until_ms <= now:
        return 0
    if fields.hash == 0:
        fields.hash = dedup_hash(queue, fields.key, fields.key_len)
    slot = dedup_add(table, queue, fields.key, fields.key_len, fields.hash, job.id_,
                     fields.until_ms, fresh)
    if slot == NULL:
        return 0
    node.used_memory += table.memory - before
    slot_attach(job, slot)
    return 1


cdef int dedup_remember_copy(NodeCore node, Job job, DedupFields* fields, int64_t now) except -1:
    """A copy's key, as its message or record carried it."""
    if fields.key == NULL:
        return 0
    if fields.queue == NULL:
        queue = <object>job.queue_
    else:
        queue = node.queue_name(PyBytes_FromStringAndSize(fields.queue, fields.queue_len))
    return dedup_remember(node, job, queue, fields, False, now)


cdef int dedup_promise(NodeCore node, Job job) except -1:
    """Its ID answers (or will answer) a duplicate: the copy is kept if the
    first ADDJOB fails (FLAG_PROMISED), through a restart too. An acked
    job's last record is its DELJOB; a waiting one is written once made."""
    if job.flags & FLAG_PROMISED or job.state == ACKED:
        return 0
    job.flags |= FLAG_PROMISED
    if job.state != WAIT_REPL:
        node.persist_job(job)
    return 0


cdef int dedup_log(NodeCore node, Job job) except -1:
    """A DEDUP record for the key of a job no LOADJOB record here carries
    (written once its copies are made: a restart must not bring back the
    key of an ADDJOB that did not succeed)."""
    if job.dedup_ != NULL and node.aof_enabled:
        node.aof.note(AOF_DEDUP, slot_fields(job.dedup_))
    return 0


cdef int dedup_forget(NodeCore node, Job job) except -1:
    """The ADDJOB that made `job` failed: its key no longer names it."""
    cdef DedupSlot* slot = job.dedup_
    if slot == NULL or not slot.live:
        return 0
    node.used_memory -= node.dedup.unlink(slot)
    if node.aof_enabled:
        node.aof.note(AOF_UNDEDUP, slot_fields(slot))
    return 0


cdef int dedup_restore(NodeCore node, object queue, const char* key, Py_ssize_t key_len,
                       const char* job_id, int64_t until_ms, bint forget) except -1:
    """A DEDUP (or, with `forget`, UNDEDUP) record read from the AOF: the
    key remembered for `job_id` (40 characters, checked by the caller)
    unless its window ended, or forgotten."""
    cdef DedupTable table = node.dedup
    cdef int64_t before = table.memory
    cdef DedupSlot* slot
    h = dedup_hash(queue, key, key_len)
    if forget:
        slot = table._find_job(queue, key, key_len, h, job_id)
        if slot != NULL:
            table.unlink(slot)
    elif until_ms > node.now_ms():
        dedup_add(table, queue, key, key_len, h, job_id, until_ms, False)
    node.used_memory += table.memory - before
    return 0
