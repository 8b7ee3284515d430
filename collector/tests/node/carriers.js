// The carriers of budget.js against the contract's table (CONVENTIONS.md section 1):
// the first present and valid carrier wins; a malformed value counts as absent and is reported.
'use strict';

const assert = require('node:assert/strict');
const { readBudget } = require('./budget.js');

const cases = [
  [{ 'x-budget-ms': '250' }, { ms: 250, source: 'x-budget-ms' }],
  [{ 'x-budget-ms': '0' }, { ms: 0, source: 'x-budget-ms' }],
  [{ 'x-budget-ms': '2147483648' }, { ms: 2147483648, source: 'x-budget-ms' }],
  [{ 'grpc-timeout': '2S' }, { ms: 2000, source: 'grpc-timeout' }],
  [{ 'grpc-timeout': '1500m' }, { ms: 1500, source: 'grpc-timeout' }],
  [{ 'grpc-timeout': '1M' }, { ms: 60000, source: 'grpc-timeout' }],
  [{ 'grpc-timeout': '2500000u' }, { ms: 2500, source: 'grpc-timeout' }],
  [{ 'grpc-timeout': '99999999n' }, { ms: 99, source: 'grpc-timeout' }],
  [{ 'x-budget-ms': '300', 'grpc-timeout': '1S' }, { ms: 300, source: 'x-budget-ms' }],
  [{ 'x-budget-ms': 'soon', 'grpc-timeout': '1S' }, { ms: 1000, source: 'grpc-timeout' }],
  [{ 'x-budget-ms': 'soon' }, { source: 'invalid', invalid: 'soon' }],
  [{ 'x-budget-ms': '-5' }, { source: 'invalid', invalid: '-5' }],
  [{ 'x-budget-ms': '2147483649' }, { source: 'invalid', invalid: '2147483649' }],
  [{ 'x-budget-ms': '99999999999' }, { source: 'invalid', invalid: '99999999999' }],
  [{ 'grpc-timeout': '123456789m' }, { source: 'invalid', invalid: '123456789m' }],
  [{ 'grpc-timeout': '5s' }, { source: 'invalid', invalid: '5s' }],
  [{}, { source: 'none' }],
];
for (const [headers, expected] of cases) {
  assert.deepEqual(readBudget(headers), expected, JSON.stringify(headers));
}
console.log(`${cases.length} cases ok`);
