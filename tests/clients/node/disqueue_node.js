'use strict'
// disqueue-node (npm), used as its README shows, against one running node.
//
//   node disqueue_node.js PORT
//
// disqueue-node opens its socket through node_redis 2.8, whose ready check
// sends INFO and parses it before the first command; the library then swaps
// in its own RESP parser. It exposes ADDJOB, GETJOB, ACKJOB, FASTACK, NACK,
// WORKING, ENQUEUE, DEQUEUE, DELJOB, QLEN, SHOW, HELLO, INFO and QSCAN (no
// QPEEK, QSTAT, JSCAN or PAUSE), and maps replies: GETJOB WITHCOUNTERS by
// the "nacks" / "additional-deliveries" labels, SHOW into an object, INFO by
// its "# Section" headers, QSCAN into {cursor, queues}.
// Prints {"report": ..., "failures": [...]} and exits non-zero on a mismatch.

const Disqueue = require('disqueue-node')
const { check, checkThat, settle, run, ports, report, deadline } = require('./common')

const DISQUE_SECTIONS = ['server', 'clients', 'memory', 'jobs', 'queues', 'persistence', 'stats', 'cpu']
const HEX40 = /^[0-9a-f]{40}$/
const JOB_ID = /^D-[0-9a-f]{8}-[0-9A-Za-z+/]{24}-[0-9a-f]{4}$/

function call (client, method, arg) {
  return new Promise((resolve, reject) => {
    client[method](arg, (error, value) => (error ? reject(error) : resolve(value)))
  })
}

async function main ([port]) {
  const client = new Disqueue({ host: '127.0.0.1', port, retryMax: 1 })
  const errors = report.errors = []
  client.on('error', (error) => errors.push(String(error && error.message)))
  await new Promise((resolve) => client.once('ready', resolve))
  const c = (method, arg) => call(client, method, arg)

  // node_redis's ready check read INFO before the library took over.
  const serverInfo = client.redisClient.server_info
  report.readyCheck = { loading: serverInfo.loading, tcp_port: serverInfo.tcp_port }
  check('ready check read INFO', serverInfo.tcp_port, String(port))

  const hello = report.hello = await c('hello', {})
  check('HELLO version', hello.version, 1)
  checkThat('HELLO node ID', hello.nodeId, (v) => HEX40.test(v))
  check('HELLO first entry', [hello.nodeIds[0], hello.nodeIds[2], hello.nodeIds[3]],
    [hello.nodeId, String(port), '1'])

  const info = report.info = await c('info', {})
  // Disque 1.0-rc1's default sections, in its order (others may come between).
  check('INFO sections', Object.keys(info).filter((name) => DISQUE_SECTIONS.includes(name)),
    DISQUE_SECTIONS)
  check('INFO server', [info.server.disque_version, info.server.tcp_port], ['1.0-rc1', String(port)])
  check('INFO jobs', info.jobs.registered_jobs, '0')

  const body = 'héllo\r\nwörld'
  const a = await c('addJob', { queue: 'dq', job: body })
  const b = await c('addJob', { queue: 'dq', job: 'second', timeout: 1000, replicate: 1, retry: 9, ttl: 200, maxlen: 10 })
  const delayed = await c('addJob', { queue: 'dq', job: 'later', delay: 60, async: true })
  report.ids = { a, b, delayed }
  for (const [name, id] of Object.entries(report.ids)) {
    checkThat('job ID format ' + name, id, (v) => JOB_ID.test(v))
    check('job ID node prefix ' + name, id.slice(2, 10), hello.nodeId.slice(0, 8))
  }
  check('TTL 200 id suffix', b.slice(-4), '0003')
  check('QLEN', await c('qlen', 'dq'), 2)

  const showB = report.showB = await c('show', b)
  check('SHOW b', [showB.id, showB.queue, showB.state, showB.repl, showB.retry, showB.body,
    showB.nacks, showB['nodes-delivered'], showB['nodes-confirmed']],
  [b, 'dq', 'queued', 1, 9, 'second', 0, [hello.nodeId], []])
  checkThat('SHOW b ttl', showB.ttl, (v) => v > 195 && v <= 200)
  const showD = await c('show', delayed)
  check('SHOW delayed', [showD.state, showD.delay], ['active', 60])
  check('SHOW bad ID', await settle(c('show', 'nonsense')), { error: 'BADID Invalid Job ID format.' })

  check('GETJOB NOHANG empty', await c('getJob', { queue: 'nothing', nohang: true }), [])
  const got = report.getjob = await c('getJob', { queue: ['dq', 'other'], count: 1, withcounters: true })
  check('GETJOB WITHCOUNTERS', got, [{ queue: 'dq', jobId: a, body, nacks: 0, additionalDeliveries: 0 }])
  check('NACK', await c('nack', [a]), 1)
  check('SHOW after NACK', [(await c('show', a)).state, (await c('show', a)).nacks], ['queued', 1])
  const both = report.getjobBoth = await c('getJob', { queue: 'dq', count: 5, withcounters: true, nohang: true })
  check('GETJOB COUNT 5', both, [
    { queue: 'dq', jobId: a, body, nacks: 1, additionalDeliveries: 0 },
    { queue: 'dq', jobId: b, body: 'second', nacks: 0, additionalDeliveries: 0 }])
  check('GETJOB without counters', (await c('enqueue', b)) + ':' +
    JSON.stringify(await c('getJob', { queue: 'dq', nohang: true })),
  '1:' + JSON.stringify([{ queue: 'dq', jobId: b, body: 'second' }]))
  check('WORKING', await c('working', b), 9)
  check('ENQUEUE', await c('enqueue', [a, b]), 2)
  check('DEQUEUE', await c('dequeue', a), 1)
  check('QLEN after ENQUEUE/DEQUEUE', await c('qlen', 'dq'), 1)
  check('ACKJOB', await c('ackJob', a), 1)
  check('SHOW acked (lone node)', await c('show', a), null)
  check('FASTACK', await c('fastAck', [b]), 1)
  check('DELJOB', await c('delJob', [delayed, a]), 1)
  check('QLEN empty', await c('qlen', 'dq'), 0)
  check('WORKING unknown', await settle(c('working', b)),
    { error: 'NOJOB Job not known in the context of this node.' })
  check('ADDJOB NOREPL', await settle(c('addJob', { queue: 'dq', job: 'x', replicate: 3 })),
    { error: 'NOREPL Not enough reachable nodes for the requested replication level' })
  check('ADDJOB without a queue', await settle(c('addJob', { job: 'x' })), { error: 'Should have a queue' })

  for (const q of ['s1', 's2', 's2', 's3', 's3', 's3']) await c('addJob', { queue: q, job: 'x' })
  const scan = report.qscan = await c('qscan', { busyloop: true, minlen: 1 })
  check('QSCAN', [scan.cursor, scan.queues.slice().sort()], [0, ['s1', 's2', 's3']])
  const mid = await c('qscan', { busyloop: true, minlen: 2, maxlen: 2 })
  check('QSCAN MINLEN MAXLEN', mid, { cursor: 0, queues: ['s2'] })
  const seen = new Set()
  let cursor = 0
  for (let i = 0; i < 100; i++) {
    const page = await c('qscan', { count: 1, minlen: 1, cursor })
    page.queues.forEach((q) => seen.add(q))
    cursor = page.cursor
    if (cursor === 0) break
  }
  check('QSCAN by pages', [cursor, [...seen].sort()], [0, ['s1', 's2', 's3']])
  const after = await c('info', {})
  check('INFO after', [after.jobs.registered_jobs, after.queues.registered_queues], ['6', '5'])
}

run(() => main(ports(process.argv.slice(2), 1)), deadline)
