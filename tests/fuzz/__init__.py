"""Coverage-guided fuzzing of what reads bytes from outside: the targets.

Each target is a module here with one function, `check(data)`, that feeds
the bytes to the real entry point and asserts that entry point's contract
(an AssertionError, or any exception the contract does not allow, is a
finding):

  resp        the engine's request parser (engine/net/resp.pxi): commands,
              "more bytes", or the protocol error the server answers with;
              the same whatever the reads' boundaries; what it parsed
              encodes back to the same commands.
  connection  a client connection's bytes (server/protocol.py over the
              engine's fast path, engine/net/conn.pxi and hot.pxi, and the
              command table), on a node, without a socket: never an
              exception, replies that are whole RESP with known error
              codes, a protocol error answered last; the hot commands
              answer the same whether the fast path or the Python loop
              ran them.
  bus         one cluster bus frame (formats/bus.py), then the job
              messages through the node (the engine's job wire format,
              engine/model/wire.pxi): a message or BadFrame; a message
              encodes back to the same bytes; a node takes any message
              without an exception; a job's wire bytes parse or are a
              ValueError, and what parses packs and parses to the same;
              the link's compiled fast path (engine/net/link.pxi) takes
              only frames the codec accepts and hands every other one to
              Python whole.
  aof         an AOF file (persistence/aof_format.py, Disque's format in
              disque_aof.py) replayed into a node as the server loads it
              (LOADJOB, DELJOB, DEDUP): records or AofDamage at a record
              boundary; the load succeeds or stops with a StartupError;
              what loaded, rewritten and loaded again, is the same.

`python -m tests.fuzz TARGET` runs one under atheris (make fuzz, make test;
docs/checking.md). The seeds each starts from are kept in corpus/TARGET/
(made by `python -m tests.fuzz.seeds`); every input that once broke a
contract is kept there too, and tests/fuzz/test_corpus.py runs each target's
check on its whole corpus in the normal suite, so none comes back.
"""

# Each target, and the Python code that reads its bytes: atheris instruments
# that for coverage (the engine's coverage comes from its build). Not what
# builds each input's node and server, nor what answers: instrumented code
# runs several times slower, and its coverage would guide nothing.
TARGETS = {
    "resp": ["disque_py.base.splitargs"],
    "connection": ["disque_py.server.protocol", "disque_py.commands", "disque_py.base.splitargs"],
    "bus": ["disque_py.formats.bus", "disque_py.node", "disque_py.engine.records"],
    "aof": ["disque_py.persistence", "disque_py.server.persistence_service",
            "disque_py.engine.records"],
}
