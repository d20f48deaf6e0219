// The official JavaScript driver (rethinkdb 2.4.x) against a scratch Ponder server:
// connecting, CRUD, cursors, changefeeds, errors with their backtraces, and a cursor
// whose connection dies.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const r = require('rethinkdb');
const { startServer, frameProxy, within, sleep } = require('./ponder.js');

let server;
let conn;

before(async () => {
  server = await startServer();
  conn = await r.connect({ host: '127.0.0.1', port: server.port });
  await r.tableCreate('people').run(conn);
  await r.tableCreate('many').run(conn);
  await r.table('many').insert(r.range(500).map((i) => ({ id: i }))).run(conn);
});

after(async () => {
  if (conn) await conn.close().catch(() => {});
  if (server) await server.stop();
});

test('connect: server info and a plain value', async () => {
  assert.equal(await r.expr(20).add(22).run(conn), 42);
  const info = await conn.server();
  assert.equal(typeof info.id, 'string');
  assert.equal(typeof info.name, 'string');
  assert.deepEqual(await r.dbList().contains('test').run(conn), true);
});

test('CRUD: insert, get, update, replace, delete', async () => {
  const t = r.table('people');
  const ins = await t.insert([{ id: 1, name: 'Ada' }, { id: 2, name: 'Grace' }]).run(conn);
  assert.equal(ins.inserted, 2);
  assert.deepEqual(await t.get(1).run(conn), { id: 1, name: 'Ada' });
  const up = await t.get(1).update({ born: 1815 }, { returnChanges: true }).run(conn);
  assert.equal(up.replaced, 1);
  assert.deepEqual(up.changes[0].new_val, { id: 1, name: 'Ada', born: 1815 });
  assert.equal((await t.get(2).replace({ id: 2, name: 'Hopper' }).run(conn)).replaced, 1);
  const names = await t.orderBy('id')('name').run(conn);
  assert.deepEqual(Array.from(names), ['Ada', 'Hopper']);
  assert.equal((await t.get(2).delete().run(conn)).deleted, 1);
  assert.equal(await t.get(2).run(conn), null);
  assert.equal(await t.count().run(conn), 1);
  const dup = await t.insert({ id: 1 }).run(conn);
  assert.equal(dup.errors, 1);
  assert.match(dup.first_error, /^Duplicate primary key `id`/);
});

test('cursors: next, each, toArray over several batches', async () => {
  const opts = { maxBatchRows: 50 };
  const all = await (await r.table('many').run(conn, opts)).toArray();
  assert.equal(all.length, 500);
  assert.equal(new Set(all.map((d) => d.id)).size, 500);

  const cur = await r.table('many').run(conn, opts);
  const first = await cur.next();
  assert.equal(typeof first.id, 'number');
  let n = 1;
  await new Promise((resolve, reject) => {
    cur.each((err) => {
      if (err) reject(err);
      else n += 1;
    }, resolve);
  });
  assert.equal(n, 500);
  await assert.rejects(cur.next(), /No more rows in the cursor/);
});

test('cursors: closing early, then the connection still works', async () => {
  const cur = await r.table('many').run(conn, { maxBatchRows: 10 });
  for (let i = 0; i < 25; i += 1) await cur.next();
  await within(cur.close(), 5000, 'cursor.close()');
  assert.equal(await r.table('many').count().run(conn), 500);
});

test('feeds: table feed delivers inserts, then closes', async () => {
  await r.tableCreate('feed_t').run(conn);
  const feed = await r.table('feed_t').changes().run(conn);
  await r.table('feed_t').insert([{ id: 'a' }, { id: 'b' }]).run(conn);
  const got = [await within(feed.next(), 5000, 'feed'), await within(feed.next(), 5000, 'feed')];
  assert.deepEqual(got.map((c) => c.new_val.id).sort(), ['a', 'b']);
  assert.deepEqual(got.map((c) => c.old_val), [null, null]);
  await within(feed.close(), 5000, 'feed.close()');
});

test('feeds: point feed with includeInitial, updates, deletion', async () => {
  await r.table('people').insert({ id: 'p', v: 0 }).run(conn);
  const feed = await r.table('people').get('p').changes({ includeInitial: true }).run(conn);
  assert.deepEqual(await within(feed.next(), 5000, 'initial'), { new_val: { id: 'p', v: 0 } });
  await r.table('people').get('p').update({ v: 1 }).run(conn);
  assert.deepEqual(await within(feed.next(), 5000, 'update'), {
    old_val: { id: 'p', v: 0 },
    new_val: { id: 'p', v: 1 },
  });
  await r.table('people').get('p').delete().run(conn);
  assert.deepEqual(await within(feed.next(), 5000, 'delete'), {
    old_val: { id: 'p', v: 1 },
    new_val: null,
  });
  await within(feed.close(), 5000, 'feed.close()');
});

test('feeds: includeInitial on a table, then live changes', async () => {
  await r.tableCreate('feed_i').run(conn);
  await r.table('feed_i').insert([{ id: 1 }, { id: 2 }, { id: 3 }]).run(conn);
  const feed = await r.table('feed_i').changes({ includeInitial: true }).run(conn);
  const initial = [];
  for (let i = 0; i < 3; i += 1) initial.push((await within(feed.next(), 5000, 'initial')).new_val.id);
  assert.deepEqual(initial.sort(), [1, 2, 3]);
  await r.table('feed_i').get(2).update({ x: true }).run(conn);
  const change = await within(feed.next(), 5000, 'change');
  assert.deepEqual(change, { old_val: { id: 2 }, new_val: { id: 2, x: true } });
  await within(feed.close(), 5000, 'feed.close()');
});

test('feeds: changes().limit(n) ends the stream by itself', async () => {
  await r.tableCreate('feed_l').run(conn);
  const feed = await r.table('feed_l').changes().limit(2).run(conn);
  await r.table('feed_l').insert([{ id: 1 }, { id: 2 }, { id: 3 }]).run(conn);
  const rows = [];
  await within(new Promise((resolve, reject) => {
    feed.each((err, row) => (err ? reject(err) : rows.push(row)), resolve);
  }), 5000, 'limited feed');
  assert.equal(rows.length, 2);
});

test('errors: runtime error names the blamed term with carets', async () => {
  const err = await r.expr({ a: 1 }).merge({ b: r.expr(1).add('x') }).run(conn).then(
    () => assert.fail('expected an error'),
    (e) => e,
  );
  assert.equal(err.name, 'ReqlQueryLogicError');
  assert.equal(err.msg, 'Expected type NUMBER but found STRING.');
  const lines = err.message.split('\n');
  assert.equal(lines[0], 'Expected type NUMBER but found STRING in:');
  const query = lines[1];
  const carets = lines[2];
  assert.equal(query, 'r({"a": 1}).merge({"b": r(1).add("x")})');
  const blamed = 'r(1).add("x")';
  const at = query.indexOf(blamed);
  assert.equal(carets.trimEnd(), ' '.repeat(at) + '^'.repeat(blamed.length));
});

test('errors: missing field and table carry their backtraces', async () => {
  const missing = await r.table('people').get(1)('nope').run(conn).then(
    () => assert.fail('expected an error'),
    (e) => e,
  );
  assert.equal(missing.name, 'ReqlNonExistenceError');
  assert.match(missing.message, /^No attribute `nope` in object:/);
  const ml = missing.message.split('\n');
  const mq = ml[ml.length - 2];
  assert.equal(mq, 'r.table("people").get(1)("nope")');
  assert.equal(ml[ml.length - 1].trimEnd(), '^'.repeat(mq.length));

  const noTable = await r.table('people').eqJoin('id', r.table('absent')).run(conn).then(
    () => assert.fail('expected an error'),
    (e) => e,
  );
  assert.equal(noTable.name, 'ReqlOpFailedError');
  const tl = noTable.message.split('\n');
  assert.equal(noTable.msg, 'Table `test.absent` does not exist.');
  assert.equal(tl[0], 'Table `test.absent` does not exist in:');
  const blamed = 'r.table("absent")';
  const at = tl[1].indexOf(blamed);
  assert.ok(at > 0, tl[1]);
  assert.equal(tl[2].trimEnd(), ' '.repeat(at) + '^'.repeat(blamed.length));
});

test('errors: compile error for an unknown optional argument', async () => {
  const err = await r.table('people').get(1).update({}, { bogus: true }).run(conn).then(
    () => assert.fail('expected an error'),
    (e) => e,
  );
  assert.equal(err.name, 'ReqlServerCompileError');
  assert.equal(err.msg, 'Unrecognized optional argument `bogus`.');
  const lines = err.message.split('\n');
  assert.equal(lines[1], 'r.table("people").get(1).update({}, {"bogus": true})');
  // RethinkDB blames the optional argument's value.
  const at = lines[1].indexOf('true');
  assert.equal(lines[2].trimEnd(), ' '.repeat(at) + '^^^^');
});

test('noreplyWait waits for earlier noreply writes, not for a later long query', async () => {
  const c = await r.connect({ host: '127.0.0.1', port: server.port });
  try {
    await r.tableCreate('nr').run(c);
    for (let i = 0; i < 50; i++) r.table('nr').insert({ id: i }).run(c, { noreply: true });
    const waited = c.noreplyWait();
    // Sent after the wait: would run for minutes, ends when the connection closes.
    r.range(1e9).map((x) => x.mul(2)).sum().run(c, { noreply: true });
    await within(waited, 20000, 'noreplyWait');
    assert.equal(await r.table('nr').count().run(conn), 50);
  } finally {
    await c.close({ noreplyWait: false });
  }
});

test('closing a cursor twice, and after it ended, is harmless', async () => {
  const cur = await r.table('many').run(conn, { maxBatchRows: 10 });
  await cur.next();
  await cur.close();
  await cur.close();
  const done = await r.range(3).run(conn);
  assert.deepEqual(await done.toArray(), [0, 1, 2]);
  await done.close();
  assert.equal(await r.expr(1).run(conn), 1);
});

test('a cursor\'s each ends with an error when the connection dies', async () => {
  const proxy = await frameProxy(server.port);
  try {
    const c = await r.connect({ host: '127.0.0.1', port: proxy.port });
    c.on('error', () => {});
    const feed = await r.table('many').changes().run(c);
    // An endless stream: its each is still reading when the connection dies.
    const cursor = await r.range().run(c, { maxBatchRows: 100 });
    const ends = [feed, cursor].map((cur) => new Promise((resolve) => {
      cur.each((err) => {
        if (err) {
          resolve(err);
          return false;
        }
        return true;
      }, () => resolve(null));
    }));
    await sleep(100);
    proxy.cut();
    for (const end of ends) {
      const err = await within(end, 5000, 'each after the connection died');
      assert.ok(err instanceof Error, 'each finished without an error');
      assert.match(err.message, /^Connection is closed/);
    }
  } finally {
    await proxy.close();
  }
});
