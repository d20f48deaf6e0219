// End-to-end tests of Ponder's web console in a real browser: playwright-core drives
// the system's Chromium (headless, a fresh profile) against scratch servers started
// with an HTTP admin port. Screenshots are saved under tests/console/artifacts/.
//
// CHROMIUM names the browser binary (default /usr/bin/chromium).
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');
const r = require('rethinkdb');
const { startServer, sleep } = require('../js/ponder');

const ARTIFACTS = path.join(__dirname, 'artifacts');
const BROWSER = process.env.CHROMIUM || '/usr/bin/chromium';
const TIMEOUT = 10000;

let server;
let client;
let context;
let page;
let profileDir;
const pageErrors = [];

async function launch() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ponder-chromium-'));
  const ctx = await chromium.launchPersistentContext(dir, {
    executablePath: BROWSER,
    headless: true,
    viewport: { width: 1200, height: 760 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  ctx.setDefaultTimeout(TIMEOUT);
  return { ctx, dir };
}

async function shot(p, name) {
  await p.screenshot({ path: path.join(ARTIFACTS, `${name}.png`) });
}

/** Types `query` into the Data Explorer and runs it. */
async function runQuery(p, query) {
  await p.fill('#query', query);
  await p.click('#run');
}

before(async () => {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  server = await startServer();
  client = await r.connect({ port: server.port });
  ({ ctx: context, dir: profileDir } = await launch());
  page = context.pages()[0] ?? await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(e.message));
});

after(async () => {
  await context?.close();
  if (profileDir) fs.rmSync(profileDir, { recursive: true, force: true });
  await client?.close();
  await server?.stop();
});

test('the dashboard loads and counts servers and tables', async () => {
  await page.goto(`http://127.0.0.1:${server.httpPort}/`);
  await page.locator('[data-stat="servers"] .num').filter({ hasText: '1' }).waitFor();
  assert.equal(await page.locator('[data-stat="databases"] .num').innerText(), '1');
  assert.match(await page.innerText('main'), /No issues\./);
  await page.waitForFunction(() => Number(document.querySelector('.dashboard')?.dataset.samples) >= 2);
  await shot(page, 'dashboard');
});

test('a table is created from the Tables page', async () => {
  await page.click('nav >> text=Tables');
  await page.fill('#new-table-name', 'people');
  await page.click('#new-table-submit');
  await page.locator('a[data-table="people"]').waitFor();
  const tables = await r.db('test').tableList().run(client);
  assert.deepEqual([...tables], ['people']);
  await shot(page, 'tables');
});

test('the Data Explorer completes terms and inserts a document', async () => {
  await page.click('nav >> text=Data Explorer');
  await page.click('#query');
  await page.fill('#query', '');
  await page.keyboard.type("r.db('test').table('people').ins");
  await page.locator('#suggest li', { hasText: 'insert' }).first().waitFor();
  await page.keyboard.press('Tab');
  assert.equal(await page.inputValue('#query'), "r.db('test').table('people').insert(");
  await page.keyboard.type("{id: 'ada', name: 'Ada Lovelace', born: 1815})");
  await page.keyboard.press('Shift+Enter');
  await page.waitForFunction(() => document.querySelector('#status')?.textContent.startsWith('Answered'));
  await page.click('[data-view="raw"]');
  const raw = JSON.parse(await page.innerText('#raw'));
  assert.equal(raw.inserted, 1);
  await page.click('[data-view="profile"]');
  assert.match(await page.innerText('#results'), /duration/);
  assert.deepEqual(await r.db('test').table('people').get('ada')('name').run(client), 'Ada Lovelace');

  // A sequence, shown as a table; a syntax error is reported, not thrown.
  await runQuery(page, "r.db('test').table('people').filter(function (p) { return p('born').lt(1900); })");
  await page.waitForFunction(() => /^1 rows/.test(document.querySelector('#status')?.textContent ?? ''));
  await page.click('[data-view="table"]');
  assert.match(await page.innerText('#results'), /Ada Lovelace/);
  await runQuery(page, "r.db('test').table(");
  await page.locator('#results .error').waitFor();
  assert.ok(await page.locator('#history li').count() >= 2);
  await shot(page, 'explorer');
});

test('the data viewer shows the document', async () => {
  await page.goto(`http://127.0.0.1:${server.httpPort}/#/tables/test/people`);
  await page.locator('#data-viewer', { hasText: 'Ada Lovelace' }).waitFor();
  assert.equal(await page.innerText('#doc-count'), '1');
  // The reconfigure dry run previews without changing anything.
  await page.fill('#reconf-shards', '2');
  await page.click('#reconf-preview');
  await page.locator('#reconf-result', { hasText: 'Dry run' }).waitFor();
  const cfg = await r.db('rethinkdb').table('table_config').filter({ name: 'people' }).nth(0).run(client);
  assert.equal(cfg.shards.length, 1);
  await shot(page, 'table');
});

test('a changefeed in the Data Explorer streams another client\'s write', async () => {
  await page.click('nav >> text=Data Explorer');
  await runQuery(page, "r.db('test').table('people').changes()");
  await page.waitForFunction(() => document.querySelector('#status')?.dataset.state === 'feed');
  await page.click('[data-view="tree"]');
  await r.db('test').table('people').insert({ id: 'grace', name: 'Grace Hopper' }).run(client);
  await page.locator('#results', { hasText: 'Grace Hopper' }).waitFor();
  await r.db('test').table('people').get('ada').update({ born: 1816 }).run(client);
  await page.waitForFunction(() => Number(document.querySelector('#results')?.dataset.count) >= 2);
  await shot(page, 'changefeed');
  await page.click('#cancel');
  await page.locator('#status', { hasText: 'Feed stopped' }).waitFor();
  // The server let go of the feed: no query of the console is left running but ours.
  await sleep(300);
  const jobs = await (await r.db('rethinkdb').table('jobs').run(client)).toArray();
  const feeds = jobs.filter((j) => j.type === 'query' && /changes|152/.test(j.info.query));
  assert.equal(feeds.length, 0, JSON.stringify(feeds));
});

test('the dashboard chart moves with writes', async () => {
  await page.click('nav >> text=Dashboard');
  // The page renders after the click: wait for the dashboard before reading it.
  await page.locator('.dashboard').waitFor();
  const before = await page.evaluate(() => Number(document.querySelector('.dashboard')?.dataset.samples ?? 0));
  let writing = true;
  const writer = (async () => {
    let i = 0;
    while (writing) {
      await r.db('test').table('people').insert({ id: `w${i++}` }).run(client);
      await sleep(5);
    }
  })();
  try {
    // Several samples, the last ones counting the writes: the line has moved.
    await page.waitForFunction((n) => {
      const d = document.querySelector('.dashboard')?.dataset;
      const shown = document.querySelector('[data-series="writes"]')?.textContent;
      return d && Number(d.samples) >= n + 4 && Number(d.lastWrites) > 0 && shown !== '0';
    }, before, { timeout: 20000 });
    await shot(page, 'dashboard-writes');
  } finally {
    writing = false;
    await writer;
  }
});

test('the servers and logs pages show the server and its log', async () => {
  await page.click('nav >> text=Servers');
  const link = page.locator('main table a').first();
  await link.waitFor();
  const name = await link.innerText();
  assert.match(await page.innerText('main'), /Ponder/);
  await link.click();
  await page.locator('main h2', { hasText: 'Serves' }).waitFor();
  const text = await page.innerText('main');
  assert.match(text, /uptime/);
  assert.match(text, /test\.people/);
  assert.ok(text.includes(name));
  await page.click('nav >> text=Logs');
  await page.locator('table.logs', { hasText: 'listening for client driver connections' }).waitFor();
  await shot(page, 'logs');
});

test('a login is asked for while admin has a password', async () => {
  const locked = await startServer({ args: ['--initial-password', 'sesame'] });
  const { ctx, dir } = await launch();
  try {
    const p = ctx.pages()[0] ?? await ctx.newPage();
    p.on('pageerror', (e) => pageErrors.push(e.message));
    await p.goto(`http://127.0.0.1:${locked.httpPort}/`);
    await p.locator('#login-password').waitFor();
    await p.fill('#login-password', 'wrong');
    await p.click('#login-submit');
    await p.locator('#login-error', { hasText: 'Wrong user name or password' }).waitFor();
    await shot(p, 'login');
    await p.fill('#login-password', 'sesame');
    await p.click('#login-submit');
    await p.locator('[data-stat="servers"] .num').filter({ hasText: '1' }).waitFor();
    // Queries carry the session's CSRF token: the Data Explorer works too.
    await p.click('nav >> text=Data Explorer');
    await runQuery(p, "r.db('rethinkdb').table('users')('id')");
    await p.locator('#results', { hasText: 'admin' }).waitFor();
    await p.click('#logout');
    await p.locator('#login-password').waitFor();
  } finally {
    await ctx.close();
    fs.rmSync(dir, { recursive: true, force: true });
    await locked.stop();
  }
});

test('no page raised an uncaught error', () => {
  assert.deepEqual(pageErrors, []);
});
