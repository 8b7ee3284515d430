// The users: a burst of N requests at once to the edge, each with BUDGET ms in the team's
// header and giving up after the same time. Not instrumented. Prints what each one saw.
// Usage: node client.js EDGE_URL N BUDGET_MS
'use strict';

const [edgeUrl, n, budget] = process.argv.slice(2);

async function one() {
  try {
    const r = await fetch(edgeUrl, {
      headers: { 'x-prazo-restante-ms': budget },
      signal: AbortSignal.timeout(Number(budget)),
    });
    await r.text();
    return String(r.status);
  } catch (error) {
    return 'gave up';
  }
}

Promise.all(Array.from({ length: Number(n) }, one)).then((answers) => {
  const counts = {};
  for (const a of answers) counts[a] = (counts[a] || 0) + 1;
  process.stdout.write(`${JSON.stringify(counts)}\n`);
});
