// The stock OpenTelemetry Node.js set-up a team writes, knowing nothing of budget-top: one
// tracer provider, the http and undici (fetch) instrumentations capturing the team's own budget
// header, and the OTLP/HTTP protobuf exporter. Loaded first, before `http` is required.
'use strict';

const { registerInstrumentations } = require('@opentelemetry/instrumentation');
const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http');
const { UndiciInstrumentation } = require('@opentelemetry/instrumentation-undici');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-proto');

// The header this team has always used for its budget: milliseconds left.
const BUDGET_HEADER = 'x-prazo-restante-ms';

function start(service, endpoint) {
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': service }),
    spanProcessors: [
      new BatchSpanProcessor(new OTLPTraceExporter({ url: `${endpoint}/v1/traces` }), {
        scheduledDelayMillis: 200,
      }),
    ],
  });
  provider.register();
  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [
      new HttpInstrumentation({
        headersToSpanAttributes: {
          server: { requestHeaders: [BUDGET_HEADER] },
          client: { requestHeaders: [BUDGET_HEADER] },
        },
      }),
      new UndiciInstrumentation({
        headersToSpanAttributes: { requestHeaders: [BUDGET_HEADER] },
      }),
    ],
  });
  return provider;
}

// Flush the spans, print what the service saw, and exit: on SIGTERM, as a deployment stops it.
function onStop(provider, report) {
  process.on('SIGTERM', async () => {
    try {
      await provider.forceFlush();
      await provider.shutdown();
    } finally {
      process.stdout.write(`${JSON.stringify(report())}\n`);
      process.exit(0);
    }
  });
}

module.exports = { start, onStop, BUDGET_HEADER };
