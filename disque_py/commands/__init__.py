"""The commands layer: what each command does, given the server's state.

    table.py        the command table (name, handler, arity, Disque's flags)
                    and dispatch: refusals answered once, before any handler
    args.py         the argument reader every handler parses its options with
    context.py      Park (answer later), CLIENT REPLY's flags, compiled()
                    handlers for the hot commands the engine runs
    services.py     what handlers may ask of the cluster and persistence
                    services (the server layer provides them)
    jobs.py, queues.py, acks.py, waits.py, deadletter.py, admin.py,
    cluster.py, info.py, diagnostics.py
                    the handlers, one module per family

A handler gets (server, session, argv) and returns a reply value
(formats/resp.py), a Park, or raises a DisqueError; it never touches a
socket. Handlers are tested by direct dispatch, without a server.
"""
