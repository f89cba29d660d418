'use strict'
// Shared helpers for the client scripts: checks that collect failures, a
// global deadline, polling with a deadline, and one JSON report on stdout.
// A script exits 0 when every check passed, 1 on a mismatch, 2 on an
// unexpected exception and 3 when its deadline passes.

const assert = require('assert')

const failures = []
const report = {}

function check (label, actual, expected) {
  try {
    assert.deepStrictEqual(actual, expected)
  } catch (error) {
    failures.push({ label, actual: plain(actual), expected: plain(expected) })
  }
  return actual
}

function checkThat (label, actual, predicate) {
  if (!predicate(actual)) failures.push({ label, actual: plain(actual) })
  return actual
}

// Error replies as plain data (the libraries give Error objects).
function plain (value) {
  if (value instanceof Error) {
    // respjs (thunk-disque) splits "-CODE text" into code and message;
    // redis-parser (disqueue-node) keeps the whole line in the message.
    const code = typeof value.code === 'string' ? value.code : ''
    const text = code && !value.message.startsWith(code + ' ') ? code + ' ' + value.message : value.message
    return { error: text }
  }
  if (Array.isArray(value)) return value.map(plain)
  if (value && typeof value === 'object') {
    const out = {}
    for (const key of Object.keys(value)) out[key] = plain(value[key])
    return out
  }
  return value
}

// The error a promise rejects with (as { error: message }), or its value.
async function settle (promise) {
  try {
    return { value: plain(await promise) }
  } catch (error) {
    return plain(error instanceof Error ? error : new Error(String(error)))
  }
}

async function pollUntil (label, deadlineMs, fn, intervalMs = 50) {
  const end = Date.now() + deadlineMs
  let last
  while (true) {
    last = await fn()
    if (last.done) return last.value
    if (Date.now() > end) {
      failures.push({ label: label + ' (timed out)', actual: plain(last.value) })
      return last.value
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs))
  }
}

function finish (code) {
  process.stdout.write(JSON.stringify({ report: plain(report), failures }) + '\n')
  process.exit(code === undefined ? (failures.length ? 1 : 0) : code)
}

function run (main, deadlineMs) {
  const timer = setTimeout(() => {
    failures.push({ label: 'deadline of ' + deadlineMs + ' ms passed' })
    finish(3)
  }, deadlineMs)
  main().then(() => {
    clearTimeout(timer)
    finish()
  }, (error) => {
    failures.push({ label: 'exception', actual: String(error && error.stack || error) })
    finish(2)
  })
}

function ports (argv, count) {
  const list = argv.map(Number)
  if (list.length !== count || !list.every((p) => Number.isInteger(p) && p > 0)) {
    process.stderr.write('expected ' + count + ' port(s), got ' + JSON.stringify(argv) + '\n')
    process.exit(64)
  }
  return list
}

const deadline = Number(process.env.NODE_CLIENT_DEADLINE_MS || 60000)

module.exports = { check, checkThat, settle, pollUntil, run, ports, report, failures, deadline }
