'use strict'
// thunk-disque (npm), used as its README shows, against running Disque nodes.
//
//   node thunk_disque.js single PORT        commands on one node
//   node thunk_disque.js cluster P0 P1 P2   a joined 3-node cluster: routing by job ID
//   node thunk_disque.js meet P0 P1 P2      3 lone nodes joined by the client's autoMeet
//
// thunk-disque sends a bare HELLO on every connection and keeps reply[1] (the
// node ID) and its first 8 characters; commands about a job (SHOW, WORKING,
// NACK, ACKJOB, FASTACK, DELJOB, ENQUEUE, DEQUEUE) go to the connection whose
// 8 characters equal characters 2..10 of the job ID (the first argument), any
// other command to the first connected node. A job ID whose node is not among
// the client's connections goes to that default node.
// Prints {"report": ..., "failures": [...]} and exits non-zero on a mismatch.

const disque = require('thunk-disque')
const { check, checkThat, settle, pollUntil, run, ports, report, deadline } = require('./common')

const HEX40 = /^[0-9a-f]{40}$/
const JOB_ID = /^D-[0-9a-f]{8}-[0-9A-Za-z+/]{24}-[0-9a-f]{4}$/

function connect (addresses, options) {
  const client = disque.createClient(addresses, Object.assign({ usePromise: true }, options))
  const connections = []
  const errors = []
  client.on('error', (error) => errors.push(String(error && error.message)))
  client.on('connection', (connection) => connections.push(connection))
  return { client, connections, errors }
}

async function waitConnections (handle, count, label) {
  await pollUntil(label + ': ' + count + ' connections', 20000,
    async () => ({ done: handle.connections.length >= count, value: handle.connections.length }))
  return handle.connections.map((c) => ({ address: c.id, nid: c.nid, sid: c.sid }))
}

async function single ([port]) {
  const h = connect([port])
  const c = h.client
  const [conn] = await waitConnections(h, 1, 'single')
  report.connection = conn
  checkThat('HELLO node ID kept by the client', conn.nid, (v) => HEX40.test(v))
  check('sid is the node ID prefix', conn.sid, conn.nid.slice(0, 8))

  const hello = report.hello = await c.hello()
  check('HELLO version', hello[0], 1)
  check('HELLO my ID', hello[1], conn.nid)
  check('HELLO entries', hello.length, 3)
  check('HELLO self entry', [hello[2][0], hello[2][2], hello[2][3]], [conn.nid, String(port), '1'])

  const info = await c.info()
  report.info = { version: info.disque_version, tcp_port: info.tcp_port }
  check('INFO tcp_port', info.tcp_port, String(port))

  const body = 'héllo\r\nwörld'
  const a = await c.addjob('tq', body, 0)
  const b = await c.addjob('tq', 'second', 0, 'REPLICATE', 1, 'RETRY', 7, 'TTL', 100, 'MAXLEN', 10)
  const delayed = await c.addjob('tq', 'later', 0, 'DELAY', 50, 'ASYNC')
  const once = await c.addjob('tq', 'once', 0, 'RETRY', 0)
  report.ids = { a, b, delayed, once }
  for (const [name, id] of Object.entries(report.ids)) {
    checkThat('job ID format ' + name, id, (v) => JOB_ID.test(v))
    check('job ID node prefix ' + name, id.slice(2, 10), conn.sid)
  }
  check('RETRY 0 id suffix', once.slice(-4), '05a0')

  check('QLEN', await c.qlen('tq'), 3)
  check('QPEEK 2', await c.qpeek('tq', 2), [['tq', a, body], ['tq', b, 'second']])
  check('QPEEK -1', await c.qpeek('tq', -1), [['tq', once, 'once']])
  check('QPEEK missing', await c.qpeek('nosuch', 1), [])

  const showB = report.showB = await c.show(b)
  check('SHOW fields', Object.keys(showB), ['id', 'queue', 'state', 'repl', 'ttl', 'ctime', 'delay',
    'retry', 'nacks', 'additional-deliveries', 'nodes-delivered', 'nodes-confirmed',
    'next-requeue-within', 'next-awake-within', 'body'])
  check('SHOW b', [showB.id, showB.queue, showB.state, showB.repl, showB.retry, showB.body,
    showB['nodes-delivered']], [b, 'tq', 'queued', 1, 7, 'second', [conn.nid]])
  checkThat('SHOW b ttl', showB.ttl, (v) => v > 95 && v <= 100)
  check('SHOW delayed state', (await c.show(delayed)).state, 'active')
  check('SHOW unknown', await c.show('D-' + conn.sid + '-' + 'x'.repeat(24) + '-05a1'), null)
  check('SHOW bad ID', await settle(c.show('nonsense')), { error: 'BADID Invalid Job ID format.' })

  // GETJOB: empty queue with NOHANG and with TIMEOUT, counters, COUNT over 2 queues.
  check('GETJOB NOHANG empty', await c.getjob('NOHANG', 'FROM', 'empty'), null)
  const started = Date.now()
  check('GETJOB TIMEOUT empty', await c.getjob('TIMEOUT', 150, 'FROM', 'empty'), null)
  checkThat('GETJOB TIMEOUT waited', Date.now() - started, (ms) => ms >= 140)
  check('GETJOB WITHCOUNTERS', await c.getjob('WITHCOUNTERS', 'FROM', 'tq'),
    [['tq', a, body, 'nacks', 0, 'additional-deliveries', 0]])
  check('WORKING', await c.working(b), 7)
  check('NACK', await c.nack(a), 1)
  const again = report.getjobAfterNack = await c.getjob('COUNT', 5, 'WITHCOUNTERS', 'FROM', 'tq', 'other')
  // WORKING took b out of the queue (a queued job becomes active).
  check('GETJOB after NACK', again, [['tq', a, body, 'nacks', 1, 'additional-deliveries', 0],
    ['tq', once, 'once', 'nacks', 0, 'additional-deliveries', 0]])
  check('SHOW a after NACK', [(await c.show(a)).state, (await c.show(a)).nacks], ['active', 1])
  check('ENQUEUE', await c.enqueue(a, b), 2)
  check('DEQUEUE', await c.dequeue(b), 1)
  check('QLEN after ENQUEUE/DEQUEUE', await c.qlen('tq'), 1)
  check('ACKJOB', await c.ackjob(a), 1)
  check('SHOW acked (lone node)', await c.show(a), null)
  check('FASTACK', await c.fastack(b, once), 2)
  check('DELJOB', await c.deljob(delayed, a), 1)
  check('QLEN empty', await c.qlen('tq'), 0)

  // QSTAT, QSCAN, JSCAN, PAUSE.
  await c.addjob('s1', 'x', 0)
  const s2a = await c.addjob('s2', 'y', 0)
  const s2b = await c.addjob('s2', 'z', 0)
  await c.getjob('FROM', 's2')
  const stat = report.qstat = await c.qstat('s2')
  check('QSTAT fields', Object.keys(stat), ['name', 'len', 'age', 'idle', 'blocked', 'import-from',
    'import-rate', 'jobs-in', 'jobs-out', 'pause'])
  check('QSTAT s2', [stat.name, stat.len, stat.blocked, stat['import-from'], stat['import-rate'],
    stat['jobs-in'], stat['jobs-out'], stat.pause], ['s2', 1, 0, [], 0, 2, 1, 'none'])
  check('QSTAT missing', await c.qstat('nosuch'), null)
  const qscan = report.qscan = await c.qscan('BUSYLOOP')
  // GETJOB created the (empty) queues it waited on; MINLEN 1 leaves them out.
  check('QSCAN', [qscan[0], ['s1', 's2', 'tq'].every((q) => qscan[1].includes(q))], ['0', true])
  const nonEmpty = await c.qscan('BUSYLOOP', 'MINLEN', 1, 'MAXLEN', 1)
  check('QSCAN MINLEN MAXLEN', [nonEmpty[0], nonEmpty[1].slice().sort()], ['0', ['s1', 's2']])
  const jscan = await c.jscan('BUSYLOOP', 'QUEUE', 's2')
  check('JSCAN QUEUE', [jscan[0], jscan[1].slice().sort()], ['0', [s2a, s2b].sort()])
  check('JSCAN STATE', await c.jscan('BUSYLOOP', 'QUEUE', 's2', 'STATE', 'queued'), ['0', [s2b]])
  const all = await c.jscan('BUSYLOOP', 'QUEUE', 's2', 'STATE', 'active', 'REPLY', 'all')
  check('JSCAN REPLY all', [all[0], all[1].length, all[1][0][0], all[1][0][1], all[1][0][5]],
    ['0', 1, 'id', s2a, 'active'])
  check('PAUSE in', await c.pause('s1', 'in'), 'in')
  check('PAUSE state', await c.pause('s1', 'state'), 'in')
  check('ADDJOB to a paused queue', await settle(c.addjob('s1', 'x', 0)),
    { error: 'PAUSED Queue paused in input, try later' })
  check('PAUSE all', await c.pause('s1', 'in', 'out'), 'all')
  check('PAUSE none', await c.pause('s1', 'none'), 'none')
  check('ADDJOB NOREPL', await settle(c.addjob('s1', 'x', 0, 'REPLICATE', 2)),
    { error: 'NOREPL Not enough reachable nodes for the requested replication level' })
  check('WORKING unknown', await settle(c.working(delayed)),
    { error: 'NOJOB Job not known in the context of this node.' })
  report.errors = h.errors
  c.clientEnd()
}

async function cluster (portList) {
  const h = connect(portList)
  const c = h.client
  const conns = report.connections = await waitConnections(h, 3, 'cluster')
  const byPort = {}
  for (const conn of conns) byPort[conn.address] = conn
  const nodes = portList.map((p) => byPort['[127.0.0.1]:' + p])
  check('one connection per node', nodes.every(Boolean), true)
  check('distinct node IDs', new Set(conns.map((x) => x.nid)).size, 3)
  for (const conn of conns) check('sid is the node ID prefix ' + conn.address, conn.sid, conn.nid.slice(0, 8))

  const hello = report.hello = await c.hello()
  check('HELLO version', hello[0], 1)
  check('HELLO lists the 3 nodes', hello.slice(2).map((e) => e[0]).sort(),
    conns.map((x) => x.nid).sort())
  check('HELLO entry shape', hello.slice(2).map((e) => [e.length, e[1]]),
    [[4, '127.0.0.1'], [4, '127.0.0.1'], [4, '127.0.0.1']])
  check('HELLO ports', hello.slice(2).map((e) => Number(e[2])).sort(),
    portList.slice().sort())

  // One single-node client per node to place jobs; the cluster client routes.
  const perNode = []
  for (const p of portList) {
    const one = connect([p])
    await waitConnections(one, 1, 'node ' + p)
    perNode.push(one)
  }

  report.routed = []
  for (let i = 0; i < 3; i++) {
    const n = perNode[i].client
    const q = 'rq' + i
    const id = await n.addjob(q, 'job on node ' + i, 0, 'REPLICATE', 1, 'RETRY', 30, 'TTL', 300)
    const entry = { node: i, id }
    report.routed.push(entry)
    check('job ID prefix is node ' + i, id.slice(2, 10), nodes[i].sid)
    // Only node i knows the job, so a SHOW answered proves the routing.
    const where = []
    for (const one of perNode) where.push((await one.client.show(id)) !== null)
    check('job ' + i + ' known on node ' + i + ' only', where, [0, 1, 2].map((k) => k === i))
    const shown = await c.show(id)
    entry.show = shown && [shown.queue, shown.state, shown.repl, shown.body]
    check('routed SHOW ' + i, entry.show, [q, 'queued', 1, 'job on node ' + i])
    check('GETJOB on node ' + i, await n.getjob('NOHANG', 'WITHCOUNTERS', 'FROM', q),
      [[q, id, 'job on node ' + i, 'nacks', 0, 'additional-deliveries', 0]])
    entry.working = await settle(c.working(id))
    check('routed WORKING ' + i, entry.working, { value: 30 })
    entry.nack = await settle(c.nack(id))
    check('routed NACK ' + i, entry.nack, { value: 1 })
    check('requeued on node ' + i, await n.getjob('NOHANG', 'WITHCOUNTERS', 'FROM', q),
      [[q, id, 'job on node ' + i, 'nacks', 1, 'additional-deliveries', 0]])
    entry.dequeue = await settle(c.dequeue(id))
    entry.enqueue = await settle(c.enqueue(id))
    check('routed DEQUEUE/ENQUEUE ' + i, [entry.dequeue, entry.enqueue], [{ value: 0 }, { value: 1 }])
    check('QLEN on node ' + i, await n.qlen(q), 1)
    // Three ways to finish: ACKJOB, FASTACK, DELJOB.
    const finish = ['ackjob', 'fastack', 'deljob'][i]
    entry.finish = finish
    entry.finished = await settle(c[finish](id))
    check('routed ' + finish + ' ' + i, entry.finished, { value: 1 })
    entry.gone = await pollUntil('job ' + i + ' gone from node ' + i, 10000,
      async () => { const v = await n.show(id); return { done: v === null, value: v } })
  }

  // A job replicated to all nodes, added and fetched through the cluster
  // client (its default node), acknowledged through the routing.
  const rid = report.replicated = await c.addjob('repq', 'everywhere', 0, 'REPLICATE', 3, 'RETRY', 30)
  const known = []
  for (const one of perNode) known.push((await one.client.show(rid)) !== null)
  check('REPLICATE 3 known on every node', known, [true, true, true])
  const owner = conns.find((x) => x.sid === rid.slice(2, 10))
  check('replicated job owner is a connected node', Boolean(owner), true)
  report.replicatedGetjob = await c.getjob('NOHANG', 'FROM', 'repq')
  check('GETJOB replicated', report.replicatedGetjob, [['repq', rid, 'everywhere']])
  check('ACKJOB replicated', await c.ackjob(rid), 1)

  // A client that does not know the job's node falls back to its default node.
  const ownerIndex = nodes.findIndex((x) => x.sid === rid.slice(2, 10))
  const fid = report.fallbackJob = await perNode[2].client.addjob('fq', 'fallback', 0, 'REPLICATE', 3)
  const partial = connect([portList[0], portList[1]])
  await waitConnections(partial, 2, 'partial')
  check('fallback SHOW', (await partial.client.show(fid)).body, 'fallback')
  check('fallback ACKJOB', await partial.client.ackjob(fid), 1)
  report.ownerIndex = ownerIndex

  report.errors = h.errors.concat(partial.errors, ...perNode.map((x) => x.errors))
  for (const one of perNode) one.client.clientEnd()
  partial.client.clientEnd()
  c.clientEnd()
}

async function meet (portList) {
  const h = connect(portList, { autoMeet: true })
  const conns = report.connections = await waitConnections(h, 3, 'meet')
  check('distinct node IDs', new Set(conns.map((x) => x.nid)).size, 3)
  // The client sent CLUSTER MEET to each node but the first; wait until the
  // node it talks to by default lists all three by their real IDs (a node in
  // handshake is listed under a temporary ID first).
  const wanted = JSON.stringify(conns.map((x) => x.nid).sort())
  const hello = report.hello = await pollUntil('HELLO lists the 3 nodes after autoMeet', 30000,
    async () => {
      const v = await h.client.hello()
      return { done: JSON.stringify(v.slice(2).map((e) => e[0]).sort()) === wanted, value: v }
    })
  check('HELLO ports after autoMeet', hello.slice(2).map((e) => Number(e[2])).sort(), portList.slice().sort())
  report.errors = h.errors
  h.client.clientEnd()
}

const [mode, ...args] = process.argv.slice(2)
const modes = { single: [single, 1], cluster: [cluster, 3], meet: [meet, 3] }
if (!modes[mode]) {
  process.stderr.write('usage: node thunk_disque.js single PORT | cluster P0 P1 P2 | meet P0 P1 P2\n')
  process.exit(64)
}
report.mode = mode
run(() => modes[mode][0](ports(args, modes[mode][1])), deadline)
