// A small Node.js HTTP chain built on budget.js, exported with the stock OTLP exporters to
// budget-top. Usage: node chain.js grpc|http-proto|http-json HOST:PORT
//
// node-frontend (edge, 1000 ms default) -> node-orders (SLA 800) -> node-inventory (SLA 300),
// plus the mistakes budget-top exists to find:
// - node-reports forwards its own SLA (3000 ms) instead of what remains: budget_reset;
// - node-search is a stock service that ignores budgets and works 600 ms while its caller
//   gives up after 100 ms: orphaned_work;
// - node-batch gets 200 ms and spends 250 ms on its own work: its call is refused, and its 504
//   comes 50 ms after its budget ran out: the deadline enforced a moment late, no finding;
// - a request that arrives with 0 ms is shed before work starts: shed_expired (info).
'use strict';

const { SpanKind, ROOT_CONTEXT, trace, defaultTextMapGetter } = require('@opentelemetry/api');
const { W3CTraceContextPropagator } = require('@opentelemetry/core');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const { budgetServer, call } = require('./budget.js');

// Point the stock exporter at budget-top (gRPC port 4317, HTTP port 4318 by default).
function exporter(transport, addr) {
  if (transport === 'grpc') {
    const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-grpc');
    return new OTLPTraceExporter({ url: `http://${addr}` });
  }
  const { OTLPTraceExporter } = transport === 'http-proto'
    ? require('@opentelemetry/exporter-trace-otlp-proto')
    : require('@opentelemetry/exporter-trace-otlp-http'); // OTLP/JSON
  return new OTLPTraceExporter({ url: `http://${addr}/v1/traces` });
}

function provider(service, transport, addr) {
  return new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': service }),
    spanProcessors: [new BatchSpanProcessor(exporter(transport, addr))],
  });
}

function listen(server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const url = (server, path) => `http://127.0.0.1:${server.address().port}${path}`;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const [transport, addr] = process.argv.slice(2);
  setTimeout(() => { console.error('chain.js: no result in 60 s'); process.exit(3); }, 60000).unref();
  const providers = {};
  const tracer = (service) => {
    providers[service] ??= provider(service, transport, addr);
    return providers[service].getTracer('budget-top-node-e2e');
  };

  const inventory = await listen(budgetServer(tracer('node-inventory'), undefined, async () => {
    await sleep(5);
    return { status: 200, body: 'in stock' };
  }));
  const orders = await listen(budgetServer(tracer('node-orders'), undefined, async (req, hop) => {
    const stock = await call(hop, 'GET inventory', url(inventory, '/stock'), 300);
    return { status: stock.status, body: `order placed: ${stock.body}` };
  }));
  // The mistake: the SLA forwarded as if it were the budget, whatever remains.
  const reports = await listen(budgetServer(tracer('node-reports'), undefined, async (req, hop) => {
    const remaining = Math.floor(hop.deadline - performance.now());
    const span = hop.tracer.startSpan('GET inventory', {
      kind: SpanKind.CLIENT,
      attributes: { 'budget.remaining_ms': remaining, 'budget.forwarded_ms': 3000, 'budget.timeout_ms': 3000 },
    }, hop.context);
    const headers = { 'x-budget-ms': '3000' };
    new W3CTraceContextPropagator().inject(trace.setSpan(hop.context, span), headers, {
      set: (carrier, key, value) => { carrier[key] = value; },
    });
    const response = await fetch(url(inventory, '/stock'), { headers });
    span.end();
    return { status: response.status, body: await response.text() };
  }));
  const batch = await listen(budgetServer(tracer('node-batch'), undefined, async (req, hop) => {
    await sleep(250); // local work that uses up the budget
    return call(hop, 'GET inventory', url(inventory, '/stock'), 300);
  }));
  // A stock service: traced, but it neither reads nor honours a budget.
  const searchTracer = tracer('node-search');
  let searchDone;
  const searchFinished = new Promise((resolve) => { searchDone = resolve; });
  const search = await listen(require('node:http').createServer((req, res) => {
    const parent = new W3CTraceContextPropagator().extract(ROOT_CONTEXT, req.headers, defaultTextMapGetter);
    const span = searchTracer.startSpan('GET /search', { kind: SpanKind.SERVER }, parent);
    setTimeout(() => {
      span.end();
      res.end('results');
      searchDone();
    }, 600);
  }));
  const frontend = await listen(budgetServer(tracer('node-frontend'), 1000, async (req, hop) => {
    const path = req.url;
    if (path === '/checkout') return call(hop, 'GET orders', url(orders, '/orders'), 800);
    if (path === '/report') return call(hop, 'GET reports', url(reports, '/reports'), 2000);
    if (path === '/search') return call(hop, 'GET search', url(search, '/search'), 100);
    return { status: 404, body: 'no such page' };
  }));

  const get = async (server, path, budget) => {
    const headers = budget === undefined ? {} : { 'x-budget-ms': budget };
    return (await fetch(url(server, path), { headers })).status;
  };
  const statuses = {
    checkout: await get(frontend, '/checkout'),
    report: await get(frontend, '/report'),
    search: await get(frontend, '/search'),
    refused: await get(batch, '/batch', '200'),
    expired: await get(orders, '/orders', '0'),
  };
  await searchFinished; // node-search finishes the work nobody waits for
  console.log(JSON.stringify(statuses));
  for (const server of [inventory, orders, reports, batch, search, frontend]) {
    server.close();
    server.closeAllConnections();
  }
  await Promise.all(Object.values(providers).map((p) => p.shutdown()));
  process.exit(0); // fetch's idle keep-alive sockets would hold the process for seconds
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
