// Tables: the list by database (create and drop tables and databases), and one
// table's page: status, shards and replicas, `reconfigure` with a dry-run preview,
// secondary indexes with their build progress, and a paged data viewer (pages follow
// the primary key with `between`, so a page costs the same wherever it is).
import { r, run, type Any } from '../db';
import { errorBox, h, jsonTree, mount, short, table } from '../ui';
import type { Page } from '../main';

const sys = r.db('rethinkdb');

function tableHref(db: string, name: string): string {
  return `#/tables/${encodeURIComponent(db)}/${encodeURIComponent(name)}`;
}

/** The list of databases and tables. */
export function tablesPage(): Page {
  const list = h('div');
  const msg = h('div');
  const dbSel = h('select#new-table-db');
  const nameIn = h('input#new-table-name', { placeholder: 'table name' });
  const pkIn = h('input#new-table-pk', { placeholder: 'primary key (id)' });
  const dbIn = h('input#new-db-name', { placeholder: 'database name' });

  async function act(q: Any, what: string): Promise<void> {
    try {
      await run(q);
      mount(msg, h('div.ok', what));
    } catch (e) {
      mount(msg, errorBox(e));
    }
    await load();
  }

  async function load(): Promise<void> {
    try {
      const [dbs, status]: Any = await Promise.all([
        run(sys.table('db_config').orderBy('name')('name')),
        run(sys.table('table_status').orderBy('db', 'name').coerceTo('array')),
      ]);
      const cur = dbSel.value;
      mount(dbSel, dbs.map((d: string) => h('option', { value: d }, d)));
      if (dbs.includes(cur)) dbSel.value = cur;
      mount(list, dbs.map((db: string) => {
        const ts = status.filter((t: Any) => t.db === db);
        return h('section.card', { 'data-db': db },
          h('div.row', h('h2', db), h('span.spacer'),
            h('button.danger.small', {
              onclick: () => confirm(`Drop database ${db} and all its tables?`) && act(r.dbDrop(db), `Dropped database ${db}.`),
            }, 'Drop database')),
          table(['table', 'shards', 'replicas', 'status', ''], ts.map((t: Any) => [
            h('a', { href: tableHref(db, t.name), 'data-table': t.name }, t.name),
            String(t.shards?.length ?? 0),
            String(t.shards?.[0]?.replicas?.length ?? 0),
            t.status?.all_replicas_ready ? h('span.ok', 'ready') : h('span.warn', JSON.stringify(t.status)),
            h('button.danger.small', {
              'data-drop': t.name,
              onclick: () => confirm(`Drop table ${db}.${t.name}?`) && act(r.db(db).tableDrop(t.name), `Dropped table ${db}.${t.name}.`),
            }, 'Drop'),
          ])));
      }));
    } catch (e) {
      mount(list, errorBox(e));
    }
  }

  const el = h('div',
    h('h1', 'Tables'),
    h('section.card.forms',
      h('form.row', {
        onsubmit: (e: Event) => {
          e.preventDefault();
          const opts = pkIn.value ? { primaryKey: pkIn.value } : {};
          void act(r.db(dbSel.value).tableCreate(nameIn.value, opts), `Created table ${dbSel.value}.${nameIn.value}.`);
          nameIn.value = '';
        },
      }, h('b', 'New table'), dbSel, nameIn, pkIn, h('button.primary#new-table-submit', { type: 'submit' }, 'Create table')),
      h('form.row', {
        onsubmit: (e: Event) => {
          e.preventDefault();
          void act(r.dbCreate(dbIn.value), `Created database ${dbIn.value}.`);
          dbIn.value = '';
        },
      }, h('b', 'New database'), dbIn, h('button', { type: 'submit' }, 'Create database'))),
    msg,
    list);
  void load();
  return { el };
}

/** One table's page. */
export function tablePage(db: string, name: string): Page {
  const tbl = r.db(db).table(name);
  const info = h('section.card');
  const shards = h('section.card');
  const indexes = h('section.card');
  const data = h('section.card#data-viewer');
  let stopped = false;
  let pk = 'id';

  async function loadInfo(): Promise<void> {
    try {
      const [cfg, st, count]: Any = await Promise.all([
        run(sys.table('table_config').filter({ db, name }).nth(0)),
        run(sys.table('table_status').filter({ db, name }).nth(0)),
        run(tbl.count()),
      ]);
      pk = cfg.primary_key;
      mount(info,
        h('h2', 'Overview'),
        table(['primary key', 'documents', 'durability', 'write acks', 'status'], [[
          cfg.primary_key, h('span#doc-count', String(count)), cfg.durability, cfg.write_acks,
          st.status.all_replicas_ready ? h('span.ok', 'all replicas ready') : short(st.status),
        ]]));
      mount(shards,
        h('h2', 'Shards and replicas'),
        table(['shard', 'primary', 'replicas', 'replica states'], cfg.shards.map((s: Any, i: number) => [
          String(i + 1), s.primary_replica, s.replicas.join(', '),
          (st.shards?.[i]?.replicas ?? []).map((x: Any) => `${x.server}: ${x.state}`).join(', '),
        ])),
        reconfigureForm(cfg.shards.length, cfg.shards[0]?.replicas.length ?? 1));
    } catch (e) {
      mount(info, errorBox(e));
    }
  }

  function reconfigureForm(nShards: number, nReplicas: number): HTMLElement {
    const shardsIn = h('input#reconf-shards', { type: 'number', min: 1, max: 64, value: String(nShards) });
    const replicasIn = h('input#reconf-replicas', { type: 'number', min: 1, value: String(nReplicas) });
    const out = h('div#reconf-result');
    const go = async (dryRun: boolean) => {
      try {
        const res: Any = await run(tbl.reconfigure({
          shards: Number(shardsIn.value), replicas: Number(replicasIn.value), dryRun,
        }));
        const ch = res.config_changes?.[0];
        mount(out,
          h('p', dryRun ? 'Dry run: nothing changed. The new configuration would be:' : `Reconfigured (${res.reconfigured}).`),
          ch ? table(['shard', 'primary', 'replicas'], ch.new_val.shards.map((s: Any, i: number) => [String(i + 1), s.primary_replica, s.replicas.join(', ')])) : null);
        if (!dryRun) void loadInfo();
      } catch (e) {
        mount(out, errorBox(e));
      }
    };
    return h('div.reconf',
      h('h3', 'Reconfigure'),
      h('div.row', h('label', 'Shards ', shardsIn), h('label', 'Replicas ', replicasIn),
        h('button#reconf-preview', { onclick: () => go(true) }, 'Preview (dry run)'),
        h('button.primary#reconf-apply', { onclick: () => go(false) }, 'Apply')),
      out);
  }

  async function loadIndexes(): Promise<void> {
    try {
      const st: Any = await run(tbl.indexStatus());
      const nameIn = h('input#new-index-name', { placeholder: 'index name (on the field of that name)' });
      const building = st.some((i: Any) => !i.ready);
      mount(indexes,
        h('h2', 'Secondary indexes'),
        table(['index', 'function', 'multi', 'geo', 'status', ''], st.map((i: Any) => [
          i.index, h('code', i.query ?? ''), String(i.multi), String(i.geo),
          i.ready ? h('span.ok', 'ready') : h('span.warn', `building ${Math.round((i.progress ?? 0) * 100)}%`),
          h('button.danger.small', {
            onclick: async () => {
              if (!confirm(`Drop index ${i.index}?`)) return;
              await run(tbl.indexDrop(i.index)).catch((e) => alert(String(e)));
              void loadIndexes();
            },
          }, 'Drop'),
        ])),
        h('form.row', {
          onsubmit: async (e: Event) => {
            e.preventDefault();
            try { await run(tbl.indexCreate(nameIn.value)); } catch (err) { alert(String(err)); }
            void loadIndexes();
          },
        }, nameIn, h('button', { type: 'submit' }, 'Create index')));
      if (building && !stopped) setTimeout(() => void loadIndexes(), 1000);
    } catch (e) {
      mount(indexes, errorBox(e));
    }
  }

  // The data viewer: pages of `size` documents in primary-key order.
  const size = 25;
  const starts: Any[] = [r.minval];
  let page = 0;
  async function loadData(): Promise<void> {
    try {
      const docs: Any[] = await run(tbl.between(starts[page], r.maxval, { index: pk, leftBound: page === 0 ? 'closed' : 'open' })
        .orderBy({ index: pk }).limit(size + 1).coerceTo('array'));
      const more = docs.length > size;
      const shown = docs.slice(0, size);
      if (more) starts[page + 1] = shown[shown.length - 1][pk];
      const cols = [pk, ...new Set(shown.flatMap((d) => Object.keys(d)).filter((k) => k !== pk))].slice(0, 12);
      mount(data,
        h('div.row', h('h2', 'Data'), h('span.spacer'),
          h('button#data-refresh', { onclick: () => void loadData() }, 'Refresh'),
          h('button#data-prev', { disabled: page === 0, onclick: () => { page--; void loadData(); } }, '‹ Previous'),
          h('span.muted', ` page ${page + 1} `),
          h('button#data-next', { disabled: !more, onclick: () => { page++; void loadData(); } }, 'Next ›')),
        table(cols, shown.map((d) => cols.map((c) => (c in d ? short(d[c], 60) : '')))),
        h('details', h('summary', 'As JSON'), jsonTree(shown, 1)));
    } catch (e) {
      mount(data, errorBox(e));
    }
  }

  void loadInfo().then(loadData);
  void loadIndexes();
  const el = h('div',
    h('div.crumbs', h('a', { href: '#/tables' }, 'Tables'), ` › ${db} › `),
    h('h1', `${db}.${name}`),
    info, shards, indexes, data);
  return { el, stop: () => { stopped = true; } };
}
