// A worker service as teams write it: 4 workers and a queue of 20 in front of them; 503 when
// the queue is full, 504 when an item leaves the queue too late to be worked before its deadline
// (the caller's budget when it sent one, else 2 s after arrival). Its work (a stand-in for a
// database call) is a span of its own.
// Usage: node worker.js OTLP_ENDPOINT WORK_MS; prints its port, and what it did on SIGTERM.
'use strict';

const [endpoint, workMs] = process.argv.slice(2);
const otel = require('./otel.js');
const provider = otel.start('worker', endpoint);
const { context, trace } = require('@opentelemetry/api');
const http = require('http');

const WORKERS = 4;
const QUEUE = 20;
const DEFAULT_MAX_WAIT_MS = 2000;
const tracer = trace.getTracer('worker');
const seen = { requests: 0, full: 0, expired: 0, expired_answered: 0, worked: 0, worked_for_nobody: 0 };
const queue = [];
let busy = 0;

function run(job) {
  busy += 1;
  if (Date.now() + Number(workMs) > job.deadline) {
    seen.expired += 1;
    // The caller may have gone already (its own timeout): then nobody reads the 504.
    if (!job.res.destroyed) seen.expired_answered += 1;
    job.res.writeHead(504).end('expired in the queue');
    return done();
  }
  context.with(job.context, () => {
    tracer.startActiveSpan('reserve stock', (span) => {
      setTimeout(() => {
        span.end();
        seen.worked += 1;
        if (job.res.destroyed) {
          seen.worked_for_nobody += 1;
        } else {
          job.res.writeHead(200).end('reserved');
        }
        done();
      }, Number(workMs));
    });
  });
}

function done() {
  busy -= 1;
  const next = queue.shift();
  if (next) run(next);
}

const server = http.createServer((req, res) => {
  seen.requests += 1;
  const budget = Number(req.headers[otel.BUDGET_HEADER]);
  const deadline = Date.now() + (Number.isFinite(budget) ? budget : DEFAULT_MAX_WAIT_MS);
  const job = { res, deadline, context: context.active() };
  if (busy < WORKERS) {
    run(job);
  } else if (queue.length < QUEUE) {
    queue.push(job);
  } else {
    seen.full += 1;
    res.writeHead(503).end('queue full');
  }
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
otel.onStop(provider, () => seen);
