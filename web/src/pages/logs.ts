// Logs: the newest entries of `rethinkdb.logs`, refreshed on demand or every 5 s.
import { r, run, type Any } from '../db';
import { errorBox, h, mount, table } from '../ui';
import type { Page } from '../main';

/** The logs page. */
export function logsPage(): Page {
  const body = h('div');
  const limit = h('select', [50, 200, 1000].map((n) => h('option', { value: String(n) }, String(n))));
  const auto = h('input', { type: 'checkbox', checked: true });
  async function load(): Promise<void> {
    try {
      const rows: Any[] = await run(r.db('rethinkdb').table('logs').orderBy(r.desc('timestamp')).limit(Number(limit.value)).coerceTo('array'));
      mount(body, table(['time', 'server', 'level', 'message'], rows.map((l) => [
        l.timestamp instanceof Date ? l.timestamp.toISOString().replace('T', ' ').replace('Z', '') : String(l.timestamp),
        l.server, h('span', { class: `level-${l.level}` }, l.level), h('span.msg', l.message),
      ]), 'logs'));
    } catch (e) {
      mount(body, errorBox(e));
    }
  }
  limit.addEventListener('change', () => void load());
  void load();
  const t = setInterval(() => { if (auto.checked) void load(); }, 5000);
  return {
    el: h('div', h('h1', 'Logs'),
      h('div.row', 'Show the newest ', limit, ' entries ', h('label', auto, ' refresh every 5 s'),
        h('button', { onclick: () => void load() }, 'Refresh')),
      h('section.card', body)),
    stop: () => clearInterval(t),
  };
}
