// The budget contract for a Node.js HTTP service (docs/instrumenting.md quotes this file).
// A hop reads the caller's budget, computes its deadline, forwards
// min(sla, remaining - margin) on every outgoing call, refuses a call when nothing is left,
// and records the contract's span attributes (CONVENTIONS.md section 2).
'use strict';

const http = require('node:http');
const {
  SpanKind, SpanStatusCode, ROOT_CONTEXT, trace, defaultTextMapGetter, defaultTextMapSetter,
} = require('@opentelemetry/api');
const { W3CTraceContextPropagator } = require('@opentelemetry/core');

const MARGIN_MS = 10; // kept back for our own reply on every call
const propagator = new W3CTraceContextPropagator();
const GRPC_UNIT_MS = { H: 3600000, M: 60000, S: 1000, m: 1, u: 0.001, n: 0.000001 };

// Each carrier: header name -> integer ms, or undefined when malformed.
const CARRIERS = [
  ['x-budget-ms', (v) => (/^\d{1,10}$/.test(v) && Number(v) <= 2 ** 31 ? Number(v) : undefined)],
  ['grpc-timeout', (v) => {
    const m = /^(\d{1,8})([HMSmun])$/.exec(v);
    return m ? Math.floor(Number(m[1]) * GRPC_UNIT_MS[m[2]]) : undefined;
  }],
];

/** The first present and valid carrier: { ms, source }, or { source: 'invalid' | 'none' }. */
function readBudget(headers) {
  let invalid;
  for (const [name, parse] of CARRIERS) {
    const value = headers[name];
    if (value === undefined) continue;
    const ms = parse(String(value));
    if (ms !== undefined) return { ms, source: name };
    invalid ??= String(value);
  }
  return invalid === undefined ? { source: 'none' } : { source: 'invalid', invalid };
}

/** Thrown by `call` when no budget is left to make it. */
class BudgetExhausted extends Error {}

/**
 * An HTTP server whose every request is a hop. `handler(req, hop)` resolves to
 * { status, body }; `defaultMs` is the budget an edge gives itself when none arrives.
 */
function budgetServer(tracer, defaultMs, handler) {
  return http.createServer((req, res) => {
    const arrival = performance.now();
    const parent = propagator.extract(ROOT_CONTEXT, req.headers, defaultTextMapGetter);
    const got = readBudget(req.headers);
    const attributes = { 'budget.source': got.source };
    let budgetMs = got.ms;
    if (got.ms !== undefined) attributes['budget.received_ms'] = got.ms;
    if (got.source === 'invalid') attributes['budget.invalid_value'] = got.invalid;
    if (got.source === 'none' && defaultMs !== undefined) {
      budgetMs = defaultMs;
      attributes['budget.source'] = 'default';
      attributes['budget.default_ms'] = defaultMs;
    }
    const deadline = budgetMs === undefined ? undefined : arrival + budgetMs;
    const span = tracer.startSpan(`${req.method} ${req.url.split('?')[0]}`,
      { kind: SpanKind.SERVER, attributes }, parent);
    const finish = (status, outcome, body) => {
      span.setAttributes({ 'budget.outcome': outcome, 'http.response.status_code': status });
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end(); // before replying: the caller's span must not end before ours
      res.writeHead(status, { 'content-type': 'text/plain' }).end(body);
    };
    if (deadline !== undefined && deadline - performance.now() <= 0) {
      return finish(504, 'shed_expired', 'budget expired before work started');
    }
    if (deadline !== undefined) {
      span.setAttribute('budget.remaining_at_start_ms', Math.floor(deadline - performance.now()));
    }
    const hop = { tracer, context: trace.setSpan(parent, span), deadline };
    handler(req, hop).then(
      ({ status, body }) => finish(status, 'ok', body),
      (err) => err instanceof BudgetExhausted || err.name === 'TimeoutError'
        ? finish(504, 'deadline_exceeded', 'out of budget')
        : finish(500, 'error', String(err)));
  });
}

/** GET `url` from inside `hop` with min(slaMs, remaining - margin) as timeout and budget. */
async function call(hop, name, url, slaMs) {
  const attributes = {};
  let timeoutMs = slaMs;
  if (slaMs !== undefined) attributes['budget.sla_ms'] = slaMs;
  if (hop.deadline !== undefined) {
    const remaining = Math.floor(hop.deadline - performance.now());
    attributes['budget.remaining_ms'] = remaining;
    timeoutMs = Math.min(slaMs ?? Infinity, remaining - MARGIN_MS);
  }
  if (timeoutMs !== undefined) attributes['budget.timeout_ms'] = timeoutMs;
  const span = hop.tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, hop.context);
  if (timeoutMs !== undefined && timeoutMs <= 0) {
    span.setAttribute('budget.outcome', 'refused'); // the call is not made
    span.end();
    throw new BudgetExhausted(`no budget left for ${name}`);
  }
  const headers = {};
  if (timeoutMs !== undefined) {
    headers['x-budget-ms'] = String(timeoutMs);
    span.setAttribute('budget.forwarded_ms', timeoutMs);
  }
  propagator.inject(trace.setSpan(hop.context, span), headers, defaultTextMapSetter);
  try {
    const signal = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs);
    const response = await fetch(url, { headers, signal });
    span.setAttribute('http.response.status_code', response.status);
    if (response.status === 503) span.setAttribute('budget.outcome', 'shed_full');
    else if (response.status === 504) span.setAttribute('budget.outcome', 'deadline_exceeded');
    else if (response.status >= 500) span.setAttribute('budget.outcome', 'error');
    return { status: response.status, body: await response.text() };
  } catch (err) {
    const timedOut = err.name === 'TimeoutError';
    span.setAttribute('budget.outcome', timedOut ? 'deadline_exceeded' : 'error');
    span.setStatus({ code: SpanStatusCode.ERROR, message: String(err) });
    throw err;
  } finally {
    span.end();
  }
}

module.exports = { BudgetExhausted, budgetServer, call, readBudget };
