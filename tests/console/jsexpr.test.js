// Unit tests of the Data Explorer's interpreter (web/src/jsexpr.ts), compiled with the
// console's own esbuild (web/node_modules) and run with the official driver's `r`.
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const Module = require('node:module');
const esbuild = require('../../web/node_modules/esbuild');
const r = require('rethinkdb');

function load() {
  const file = path.join(__dirname, '..', '..', 'web', 'src', 'jsexpr.ts');
  const out = esbuild.buildSync({ entryPoints: [file], bundle: true, format: 'cjs', platform: 'node', write: false });
  const m = new Module(file);
  m._compile(out.outputFiles[0].text, file);
  return m.exports;
}
const { evalExpressions, ExprError } = load();
const one = (src) => evalExpressions(src, { r })[0];
// A term's JSON with its variable numbers (a driver-wide counter) renumbered 1, 2, ...
function norm(t) {
  const ids = new Map();
  const id = (n) => { if (!ids.has(n)) ids.set(n, ids.size + 1); return ids.get(n); };
  return JSON.stringify(t.build())
    .replace(/\[69,\[\[2,\[([\d,]+)\]\]/g, (_, ns) => `[69,[[2,[${ns.split(',').map(id).join(',')}]]`)
    .replace(/\[10,\[(\d+)\]\]/g, (_, n) => `[10,[${id(n)}]]`);
}
const term = (src) => norm(one(src));

test('queries build the same terms as the driver', () => {
  assert.equal(term("r.db('test').table('x').filter(function (d) { return d('n').gt(1); })"),
    norm(r.db('test').table('x').filter((d) => d('n').gt(1))));
  assert.equal(term("r.table('x').map((a) => ({n: a('n').add(1), s: 'x\\ty'}))"),
    norm(r.table('x').map((a) => ({ n: a('n').add(1), s: 'x\ty' }))));
  assert.equal(term("r.table('x').insert({id: 1, tags: ['a', \"b\"]}, {conflict: 'replace'})"),
    norm(r.table('x').insert({ id: 1, tags: ['a', 'b'] }, { conflict: 'replace' })));
  assert.equal(term("r.expr([1, 2]).reduce((a, b) => a.add(b))"),
    norm(r.expr([1, 2]).reduce((a, b) => a.add(b))));
  assert.equal(term('r.table("x").orderBy(r.desc("n")).limit(-(-3) * 2)'),
    norm(r.table('x').orderBy(r.desc('n')).limit(6)));
});

test('plain values, operators and several statements', () => {
  assert.deepEqual(one('[1 + 2 * 3, 7 % 4, 1 < 2 && !false, null ?? "d", true ? .5 : 1e3]'), [7, 3, true, 'd', 0.5]);
  assert.equal(evalExpressions("1; // a comment\n /* and another */ 'two';", { r })[1], 'two');
  assert.equal(one('Math.max(1, 5)'), 5);
  assert.ok(one('new Date(0)') instanceof Date);
});

test('text that is not an expression of the subset is refused', () => {
  for (const src of ["r.table('x'", 'var a = 1', 'window.location', "r.constructor('return 1')", "r['__proto__']",
    '`a${1}`', 'function (x) { x = 1; }', 'r.expr(1) = 2', 'new Function("x")', 'alert(1)']) {
    assert.throws(() => evalExpressions(src, { r }), ExprError, src);
  }
});
