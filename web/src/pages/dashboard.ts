// The dashboard: servers, tables, indexes and current issues at a glance, and live
// reads and writes per second (the cluster row of `rethinkdb.stats`, polled each second).
import { r, run, type Any } from '../db';
import { errorBox, h, LineChart, mount, table } from '../ui';
import type { Page } from '../main';

/** The dashboard page. */
export function dashboardPage(): Page {
  const chart = new LineChart(['reads', 'writes'], ['#2563eb', '#dc2626']);
  const cards = h('div.cards');
  const issues = h('div');
  const el = h('div.dashboard',
    h('h1', 'Dashboard'),
    cards,
    h('section.card', h('h2', 'Reads and writes per second'), chart.el),
    h('section.card', h('h2', 'Current issues'), issues));
  el.dataset.samples = '0';
  let stopped = false;

  const sys = r.db('rethinkdb');
  async function overview(): Promise<void> {
    try {
      const o: Any = await run(r.expr({
        servers: sys.table('server_status').count(),
        tables: sys.table('table_config').count(),
        dbs: sys.table('db_config').count(),
        indexes: sys.table('table_config').map((t: Any) => t('indexes').count()).sum(),
        connections: sys.table('stats').get(['cluster'])('query_engine')('client_connections'),
        issues: sys.table('current_issues').coerceTo('array'),
      }));
      const card = (n: number, label: string, href: string) =>
        h('a.card.stat', { href, 'data-stat': label }, h('div.num', String(n)), h('div.label', label));
      mount(cards,
        card(o.servers, 'servers', '#/servers'),
        card(o.dbs, 'databases', '#/tables'),
        card(o.tables, 'tables', '#/tables'),
        card(o.indexes, 'indexes', '#/tables'),
        card(o.connections, 'connections', '#/servers'),
        card(o.issues.length, 'issues', '#/'));
      mount(issues, o.issues.length
        ? table(['type', 'critical', 'description'], o.issues.map((i: Any) => [i.type, String(i.critical), i.description]))
        : h('p.ok', 'No issues.'));
    } catch (e) {
      mount(cards, errorBox(e));
    }
  }

  async function sample(): Promise<void> {
    try {
      const s: Any = await run(sys.table('stats').get(['cluster'])('query_engine'));
      if (stopped) return;
      chart.push([s.read_docs_per_sec ?? 0, s.written_docs_per_sec ?? 0]);
      el.dataset.samples = String(Number(el.dataset.samples) + 1);
      el.dataset.lastWrites = String(s.written_docs_per_sec ?? 0);
      el.dataset.lastReads = String(s.read_docs_per_sec ?? 0);
    } catch {
      /* the overview shows the error */
    }
  }

  void overview();
  void sample();
  const t1 = setInterval(() => void sample(), 1000);
  const t2 = setInterval(() => void overview(), 5000);
  return { el, stop: () => { stopped = true; clearInterval(t1); clearInterval(t2); } };
}
