// A scratch Ponder server for the Node end-to-end tests, started like the Python ones
// (tests/conftest.py): a free port, a temporary data directory, the binary named by
// PONDER_BIN (default target/release/ponder), killed when the test file ends.
//
// `startServer({ args })` resolves to { port, httpPort, proc, stop(), kill() } (`args`:
// more flags for `ponder serve`). `frameProxy(port)` is a
// TCP proxy in front of a server that records the response frames (token, type, notes)
// the client was sent, and can cut the connection as a dead server would; with
// `{ coalesceMs }` it holds what the client sends for that long and forwards it as one
// write, as a slow network does, so requests sent a moment apart reach the server together.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..', '..');
const BINARY = process.env.PONDER_BIN || path.join(ROOT, 'target', 'release', 'ponder');

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.on('connect', () => { s.destroy(); resolve(true); });
    s.on('error', () => resolve(false));
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function startServer({ args = [] } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ponder-js-'));
  const port = await freePort();
  const httpPort = await freePort();
  const proc = spawn(BINARY, ['serve', '--directory', dir, '--driver-port', String(port),
    '--http-port', String(httpPort), ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (b) => { stderr += b; });
  let exited = false;
  const gone = new Promise((resolve) => proc.on('exit', () => { exited = true; resolve(); }));
  const deadline = Date.now() + 30000;
  for (;;) {
    if (exited) throw new Error(`ponder exited: ${stderr}`);
    if (await canConnect(port)) break;
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error('ponder did not start listening');
    }
    await sleep(50);
  }
  const cleanup = () => fs.rmSync(dir, { recursive: true, force: true });
  return {
    port,
    httpPort,
    proc,
    /** Kills the server at once (SIGKILL), as a crash would. */
    async kill() {
      if (!exited) proc.kill('SIGKILL');
      await gone;
    },
    /** Stops the server and removes its data. */
    async stop() {
      if (!exited) {
        proc.kill('SIGTERM');
        const timer = setTimeout(() => proc.kill('SIGKILL'), 10000);
        await gone;
        clearTimeout(timer);
      }
      cleanup();
    },
  };
}

// Response frames after the handshake: token (8 bytes LE), length (4 bytes LE), JSON.
function parseFrames(state, chunk, onFrame) {
  state.buf = Buffer.concat([state.buf, chunk]);
  if (!state.shookHands) {
    // The V1_0 handshake's server messages are NUL-terminated JSON; the last one
    // carries "authentication" with the server's final SCRAM message.
    for (;;) {
      const nul = state.buf.indexOf(0);
      if (nul < 0) return;
      const msg = state.buf.subarray(0, nul).toString();
      state.buf = state.buf.subarray(nul + 1);
      if (msg.includes('"authentication"') && msg.includes('v=')) {
        state.shookHands = true;
        break;
      }
    }
  }
  while (state.buf.length >= 12) {
    const len = state.buf.readUInt32LE(8);
    if (state.buf.length < 12 + len) return;
    const token = Number(state.buf.readBigUInt64LE(0));
    const body = JSON.parse(state.buf.subarray(12, 12 + len).toString());
    state.buf = state.buf.subarray(12 + len);
    const frame = { token, t: body.t, n: body.n || [], count: (body.r || []).length };
    if (body.t >= 16) [frame.error] = body.r;
    onFrame(frame);
  }
}

/** A proxy on a free port in front of `port`, recording response frames in `frames`
 * ({ token, t, n, count } and, for an error, its message). */
async function frameProxy(port, { coalesceMs = 0 } = {}) {
  const frames = [];
  const sockets = new Set();
  const srv = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    sockets.add(client);
    sockets.add(upstream);
    const state = { buf: Buffer.alloc(0), shookHands: false };
    let held = [];
    let timer = null;
    client.on('data', (b) => {
      if (coalesceMs <= 0) {
        upstream.write(b);
        return;
      }
      held.push(b);
      if (timer === null) {
        timer = setTimeout(() => {
          timer = null;
          upstream.write(Buffer.concat(held));
          held = [];
        }, coalesceMs);
      }
    });
    upstream.on('data', (b) => {
      parseFrames(state, b, (f) => frames.push(f));
      client.write(b);
    });
    const end = () => { client.destroy(); upstream.destroy(); };
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', end);
    upstream.on('error', end);
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return {
    port: srv.address().port,
    frames,
    /** Cuts every proxied connection (the client sees its socket close). */
    cut() {
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    close() {
      this.cut();
      return new Promise((resolve) => srv.close(() => resolve()));
    },
  };
}

/** Waits until `pred()` is true, failing after `ms`. */
async function until(pred, ms = 5000, what = 'condition') {
  const deadline = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** Rejects with a clear error if `promise` has not settled within `ms`. */
function within(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

module.exports = { startServer, frameProxy, until, within, sleep };
