// Changefeeds, cursors and streams through the community Node drivers (rethinkdbdash,
// thinky, rethinkdb-ts), each case with the library that showed it going wrong. A frame
// proxy records what the server answered, so a test can also say which frame was wrong.
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { Readable, Writable } = require('node:stream');
const { startServer, frameProxy, within, sleep } = require('./ponder.js');

const CLIENT_ERROR = 16;

let server;
let proxy;
let dash; // rethinkdbdash, through the proxy
let ts; // rethinkdb-ts
let tsConn;

before(async () => {
  server = await startServer();
  // Requests sent within 2 ms of each other reach the server in one segment.
  proxy = await frameProxy(server.port, { coalesceMs: 2 });
  dash = require('rethinkdbdash')({ host: '127.0.0.1', port: proxy.port, silent: true });
  await dash.tableCreate('feeds').run();
  await dash.tableCreate('points').run();
  await dash.tableCreate('sink').run();
  await dash.tableCreate('piped').run();
  ts = require('rethinkdb-ts').r;
  tsConn = await ts.connect({ host: '127.0.0.1', port: proxy.port, silent: true });
});

after(async () => {
  if (tsConn) await tsConn.close().catch(() => {});
  if (dash) await dash.getPoolMaster().drain();
  if (proxy) await proxy.close();
  if (server) await server.stop();
});

/** "Token N not in stream cache." errors the server sent since frame `from`: a refused
 * request for a cursor the driver had not closed (none is expected). A CONTINUE the
 * driver sent after its own STOP is refused "ERROR: duplicate token N", as RethinkDB
 * does, and the driver ignores that answer. */
function streamCacheErrors(from) {
  return proxy.frames
    .slice(from)
    .filter((f) => f.t === CLIENT_ERROR && /not in stream cache/.test(f.error));
}

test('rethinkdbdash: a feed closed as soon as a change arrives closes cleanly', async () => {
  // The driver asks for the next batch (CONTINUE) the moment a batch arrives, so a
  // feed closed from its first change sends CONTINUE and STOP back to back. The server
  // must take them in that order: the STOP ends the feed, and neither request is
  // answered "Token N not in stream cache." (which the driver passes to close()).
  const from = proxy.frames.length;
  for (let i = 0; i < 20; i += 1) {
    const feed = await dash.table('feeds').changes().run();
    const change = within(new Promise((resolve, reject) => {
      feed.each((err, row) => {
        if (err) return reject(err);
        feed.close().then(() => resolve(row), reject);
        return false;
      });
    }), 5000, 'the first change and close()');
    await dash.table('feeds').insert({ round: i }).run();
    assert.equal((await change).new_val.round, i);
  }
  assert.deepEqual(streamCacheErrors(from), []);
});

test('rethinkdbdash: point feed with includeInitial, closed from its each callback', async () => {
  const from = proxy.frames.length;
  await dash.table('points').insert({ id: 'p', v: 0 }).run();
  for (let i = 0; i < 10; i += 1) {
    const feed = await dash.table('points').get('p').changes({ includeInitial: true }).run();
    const seen = await within(new Promise((resolve, reject) => {
      const rows = [];
      feed.each((err, row) => {
        if (err) return reject(err);
        rows.push(row);
        if (rows.length === 2) feed.close().then(() => resolve(rows), reject);
        return undefined;
      });
      dash.table('points').get('p').update({ v: i + 1 }).run().catch(reject);
    }), 5000, 'point feed');
    assert.deepEqual(seen[0], { new_val: { id: 'p', v: i } });
    assert.deepEqual(seen[1].new_val, { id: 'p', v: i + 1 });
  }
  assert.deepEqual(streamCacheErrors(from), []);
});

test('thinky: model feeds and document feeds close without a stream-cache error', async () => {
  const thinky = require('thinky')({ host: '127.0.0.1', port: proxy.port, silent: true });
  try {
    const User = thinky.createModel('users', { id: String, name: String });
    await User.ready();
    const from = proxy.frames.length;
    for (let i = 0; i < 10; i += 1) {
      const feed = await User.changes();
      const got = within(new Promise((resolve, reject) => {
        feed.each((err, doc) => {
          if (err) return reject(err);
          feed.close().then(() => resolve(doc), reject);
          return undefined;
        });
      }), 5000, 'model feed');
      await User.save({ id: `u${i}`, name: `User ${i}` });
      assert.equal((await got).name, `User ${i}`);
    }
    // A document with its feed (get(k).changes()), updated, then its feed closed.
    const doc = await User.get('u0').changes({ includeInitial: true });
    assert.equal(doc.name, 'User 0');
    const changed = new Promise((resolve) => doc.once('change', resolve));
    await User.get('u0').update({ name: 'Renamed' });
    await within(changed, 5000, 'document change');
    assert.equal(doc.name, 'Renamed');
    await within(doc.closeFeed(), 5000, 'closeFeed()');
    assert.deepEqual(streamCacheErrors(from), []);
  } finally {
    await thinky.r.getPoolMaster().drain();
  }
});

test('rethinkdb-ts: get(k).changes() consumed as a Node stream delivers changes', async () => {
  await ts.table('points').insert({ id: 'ts', v: 0 }, { conflict: 'replace' }).run(tsConn);
  const from = proxy.frames.length;

  // 'data' listener: the stream machinery reads twice at once, so the driver sends a
  // second CONTINUE while the first still waits for a change. RethinkDB serves it
  // after the first; refusing it ended the stream before any change arrived.
  const cursor = await ts.table('points').get('ts').changes().getCursor(tsConn);
  const first = new Promise((resolve, reject) => {
    cursor.once('data', resolve);
    cursor.once('error', reject);
  });
  await sleep(50);
  await ts.table('points').get('ts').update({ v: 1 }).run(tsConn);
  assert.deepEqual(await within(first, 5000, 'a change on the stream'), {
    old_val: { id: 'ts', v: 0 },
    new_val: { id: 'ts', v: 1 },
  });
  await cursor.close();

  // Piped into a writable.
  const piped = await ts.table('points').get('ts').changes().getCursor(tsConn);
  const written = new Promise((resolve) => {
    piped.pipe(new Writable({
      objectMode: true,
      write(change, _enc, done) {
        resolve(change);
        done();
      },
    }));
  });
  await sleep(50);
  await ts.table('points').get('ts').update({ v: 2 }).run(tsConn);
  assert.deepEqual((await within(written, 5000, 'a piped change')).new_val, { id: 'ts', v: 2 });
  await piped.close();
  assert.deepEqual(streamCacheErrors(from), []);
});

test('rethinkdbdash: writable and transform streams insert what is piped in', async () => {
  const docs = Array.from({ length: 300 }, (_, i) => ({ id: i, pad: 'x'.repeat(20) }));
  const writable = dash.table('sink').toStream({ writable: true });
  const finished = new Promise((resolve, reject) => {
    writable.on('finish', resolve);
    writable.on('error', reject);
  });
  Readable.from(docs).pipe(writable);
  await within(finished, 20000, 'writable stream');
  assert.equal(await dash.table('sink').count().run(), 300);

  // A table read as a stream, through a transform stream into another table.
  const transform = dash.table('piped').toStream({ transform: true });
  // rethinkdbdash reads Node's old `_writableState.lastBufferedRequest`, which today's
  // Node no longer has: one branch of its transform stream (taken when an insert's
  // answer comes back between two writes, so only sometimes) then throws on
  // `undefined.chunk`, a driver bug unrelated to the server. `null` is what old Node
  // held when nothing was buffered, the case that branch tests for.
  transform._writableState.lastBufferedRequest = null;
  const out = [];
  const ended = new Promise((resolve, reject) => {
    transform.on('data', (d) => out.push(d));
    transform.on('end', resolve);
    transform.on('error', reject);
  });
  dash.table('sink').toStream({ maxBatchRows: 50 }).pipe(transform);
  await within(ended, 20000, 'transform stream');
  assert.equal(out.length, 300);
  assert.deepEqual(out.map((d) => d.id).sort((a, b) => a - b), docs.map((d) => d.id));
  assert.equal(await dash.table('piped').count().run(), 300);
});

/** Runs `each` over `cursor`; resolves with the error it ended with, or null. */
function eachEnd(cursor) {
  return new Promise((resolve) => {
    const ended = cursor.each((err) => {
      if (err) {
        resolve(err);
        return false;
      }
      return true;
    }, () => resolve(null));
    if (ended && typeof ended.catch === 'function') ended.catch(resolve);
  });
}

test('each ends with an error when the connection dies (rethinkdbdash, rethinkdb-ts)', async () => {
  const own = await frameProxy(server.port);
  try {
    const r1 = require('rethinkdbdash')({ pool: false, cursor: true, silent: true });
    const c1 = await r1.connect({ host: '127.0.0.1', port: own.port });
    c1.on('error', () => {});
    const c2 = await ts.connect({ host: '127.0.0.1', port: own.port, silent: true });
    c2.on('error', () => {});
    const ends = [
      eachEnd(await r1.table('feeds').changes().run(c1)),
      eachEnd(await r1.range(1e9).run(c1, { maxBatchRows: 100 })),
      eachEnd(await ts.table('feeds').changes().getCursor(c2)),
      eachEnd(await ts.range(1e9).getCursor(c2, { maxBatchRows: 100 })),
    ];
    await sleep(100);
    own.cut();
    for (const end of ends) {
      const err = await within(end, 5000, 'each after the connection died');
      assert.ok(err instanceof Error, 'each finished without an error');
      assert.match(err.message, /connection was closed/i);
    }
  } finally {
    await own.close();
  }
});
