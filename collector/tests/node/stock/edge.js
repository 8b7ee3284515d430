// The edge service as teams write it: reads the team's budget header (default 1000 ms) and
// calls the worker with fetch. VARIANT `fixed`: a fixed 2 s AbortSignal.timeout and no header
// (the budget stops here); `propagated`: what remains, minus a 50 ms margin, as both the
// timeout and the header; `racing`: no header and no signal, the fetch raced against what
// remains minus the margin, answering 504 when the timer wins and leaving the fetch open (it
// counts, in `left_open_answered`, the fetches that then got the worker's 200 anyway).
// The margin keeps back time for the edge's own answer.
// Usage: node edge.js OTLP_ENDPOINT WORKER_URL VARIANT; prints its port.
'use strict';

const [endpoint, workerUrl, variant] = process.argv.slice(2);
const otel = require('./otel.js');
const provider = otel.start('edge', endpoint);
const http = require('http');

const FIXED_TIMEOUT_MS = 2000;
const MARGIN_MS = 50;
const seen = { requests: 0, answered: {}, timed_out: 0, left_open_answered: 0 };

async function callWorker(budget, arrival) {
  if (variant === 'racing') {
    const left = Math.max(budget - (Date.now() - arrival) - MARGIN_MS, 0);
    let answered = false;
    const call = fetch(workerUrl).then(async (r) => {
      await r.text();
      if (answered && r.status === 200) seen.left_open_answered += 1;
      return { status: r.status, text: async () => '' };
    }).catch(() => null);
    const timer = new Promise((resolve) => setTimeout(resolve, left, null));
    const first = await Promise.race([call, timer]);
    answered = true;
    return first;
  }
  if (variant === 'fixed') {
    return fetch(workerUrl, { signal: AbortSignal.timeout(FIXED_TIMEOUT_MS) });
  }
  const left = budget - (Date.now() - arrival) - MARGIN_MS;
  if (left <= 0) return null;
  return fetch(workerUrl, {
    headers: { [otel.BUDGET_HEADER]: String(left) },
    signal: AbortSignal.timeout(left),
  });
}

const server = http.createServer(async (req, res) => {
  const arrival = Date.now();
  seen.requests += 1;
  const header = Number(req.headers[otel.BUDGET_HEADER]);
  const budget = Number.isFinite(header) ? header : 1000;
  let status;
  try {
    const answer = await callWorker(budget, arrival);
    status = answer ? answer.status : 504;
    if (answer) await answer.text();
  } catch (error) {
    seen.timed_out += 1;
    status = 504;
  }
  seen.answered[status] = (seen.answered[status] || 0) + 1;
  if (!res.destroyed) res.writeHead(status).end();
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
otel.onStop(provider, () => seen);
