// Servers: the list (`rethinkdb.server_status` with each server's connection count
// from `rethinkdb.stats`) and one server's page: version, uptime, addresses,
// connections, and the table replicas it serves.
import { r, run, type Any } from '../db';
import { duration, errorBox, h, jsonTree, mount, table } from '../ui';
import type { Page } from '../main';

const sys = r.db('rethinkdb');

function uptime(s: Any): string {
  const started = new Date(s.process.time_started).getTime();
  return duration(Math.max(0, (Date.now() - started) / 1000));
}

async function load(): Promise<{ servers: Any[]; stats: Map<string, Any> }> {
  const [servers, stats]: Any = await Promise.all([
    run(sys.table('server_status').orderBy('name')),
    run(sys.table('stats').filter((s: Any) => s('id').nth(0).eq('server')).coerceTo('array')),
  ]);
  return { servers, stats: new Map(stats.map((s: Any) => [s.server, s.query_engine])) };
}

/** The list of servers. */
export function serversPage(): Page {
  const body = h('div', 'Loading…');
  void load().then(({ servers, stats }) => mount(body, table(
    ['server', 'version', 'uptime', 'driver port', 'HTTP port', 'connections'],
    servers.map((s: Any) => [
      h('a', { href: `#/servers/${encodeURIComponent(s.name)}` }, s.name),
      s.process.version, uptime(s), String(s.network.reql_port), String(s.network.http_admin_port),
      String(stats.get(s.name)?.client_connections ?? ''),
    ]))), (e) => mount(body, errorBox(e)));
  return { el: h('div', h('h1', 'Servers'), h('section.card', body)) };
}

/** One server's page. */
export function serverPage(name: string): Page {
  const body = h('div', 'Loading…');
  void (async () => {
    const { servers, stats } = await load();
    const s = servers.find((x: Any) => x.name === name);
    if (!s) { mount(body, errorBox(`No server named ${name}.`)); return; }
    const q = stats.get(name) ?? {};
    const replicas: Any[] = await run(sys.table('table_status').concatMap((t: Any) =>
      t('shards').map((sh: Any) => ({ db: t('db'), table: t('name'), primary: sh('primary_replicas').contains(name), replica: sh('replicas').filter({ server: name }).nth(0).default(null) }))
        .filter((x: Any) => x('replica').ne(null))).coerceTo('array'));
    mount(body,
      h('section.card', h('h2', 'Overview'), table(['', ''], [
        ['version', s.process.version],
        ['uptime', uptime(s)],
        ['started', s.process.time_started instanceof Date ? s.process.time_started.toISOString() : String(s.process.time_started)],
        ['host', s.network.hostname],
        ['driver port', String(s.network.reql_port)],
        ['HTTP admin port', String(s.network.http_admin_port)],
        ['cache size', `${s.process.cache_size_mb} MB`],
        ['client connections', String(q.client_connections ?? '')],
        ['queries per second', String(q.queries_per_sec ?? '')],
        ['documents read / written', `${q.read_docs_total ?? ''} / ${q.written_docs_total ?? ''}`],
      ], 'kv')),
      h('section.card', h('h2', 'Serves'), table(['table', 'role', 'state'], replicas.map((x: Any) => [
        h('a', { href: `#/tables/${encodeURIComponent(x.db)}/${encodeURIComponent(x.table)}` }, `${x.db}.${x.table}`),
        x.primary ? 'primary' : 'replica', x.replica.state,
      ]))),
      h('section.card', h('h2', 'Status document'), jsonTree(s)));
  })().catch((e) => mount(body, errorBox(e)));
  return { el: h('div', h('div.crumbs', h('a', { href: '#/servers' }, 'Servers'), ' › '), h('h1', name), body) };
}
