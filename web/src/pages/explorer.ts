// The Data Explorer: ReQL in the JavaScript driver's syntax, evaluated with `r` in
// scope by `jsexpr` (never `eval`), run on a connection of its own so that Cancel can
// close it. Results are shown as a tree, a table or raw JSON, with the query's profile;
// a changefeed streams into the view until cancelled. Past queries are kept in the
// browser's localStorage. Term names are completed from the driver's own `r` and term
// prototype, so the list matches the driver that runs the query.
import { connect, r, unwrap, type Any } from '../db';
import { evalExpressions } from '../jsexpr';
import { errorBox, h, jsonReplacer, jsonTree, mount, short } from '../ui';
import type { Page } from '../main';

const HISTORY_KEY = 'ponder.explorer.history';
const PAGE = 100;

type View = 'tree' | 'table' | 'raw' | 'profile';

function history(): string[] {
  try {
    return JSON.parse(localStorage.getItem(HISTORY_KEY) ?? '[]');
  } catch {
    return [];
  }
}

function remember(q: string): void {
  const list = [q, ...history().filter((x) => x !== q)].slice(0, 50);
  localStorage.setItem(HISTORY_KEY, JSON.stringify(list));
}

/** Names offered after `r.` and after `<term>.` */
function completions(): { top: string[]; term: string[] } {
  const names = (o: object, stop: object | null) => {
    const out = new Set<string>();
    for (let p: object | null = o; p && p !== stop; p = Object.getPrototypeOf(p)) {
      for (const k of Object.getOwnPropertyNames(p)) {
        if (/^[a-z][A-Za-z0-9]*$/.test(k) && typeof (p as Record<string, unknown>)[k] === 'function' && k !== 'constructor') out.add(k);
      }
    }
    return [...out].sort();
  };
  const hidden = new Set(['build', 'compose', 'toString', 'showRunWarning', 'connect', 'toJSON', 'constructor']);
  return {
    top: names(r, Function.prototype).concat(['row', 'minval', 'maxval']).filter((k) => !hidden.has(k)).sort(),
    term: names(r.expr(1), Object.prototype).filter((k) => !hidden.has(k)),
  };
}

/** The Data Explorer page. */
export function explorerPage(): Page {
  const names = completions();
  const editor = h('textarea#query', {
    spellcheck: 'false', rows: 5,
    placeholder: "r.db('test').tableList()   — Shift+Enter runs, Tab completes",
  });
  editor.value = history()[0] ?? "r.db('test').tableList()";
  const suggest = h('ul.suggest.hidden#suggest');
  const runBtn = h('button.primary#run', 'Run');
  const cancelBtn = h('button#cancel', { disabled: true }, 'Cancel');
  const profileBox = h('input#want-profile', { type: 'checkbox' });
  const status = h('span.status#status');
  const results = h('div.results#results');
  const histList = h('ul.history#history');
  const tabs = h('div.tabs');
  let view: View = 'tree';

  // What the last query answered.
  let rows: unknown[] = [];
  let atom: { value: unknown } | null = null;
  let profile: unknown = null;
  let error: unknown = null;
  let cursor: Any = null;
  let conn: Any = null;
  let more = false;
  let feed = false;
  let running = false;
  let renderQueued = false;
  let runId = 0; // which run the page shows: a cancelled run's late answer is ignored

  function setView(v: View): void {
    view = v;
    render();
  }
  const tabBtn = (v: View, label: string) => h('button.tab', { 'data-view': v, onclick: () => setView(v) }, label);

  function value(): unknown {
    return atom ? atom.value : rows;
  }

  function render(): void {
    mount(tabs, tabBtn('tree', 'Tree'), tabBtn('table', 'Table'), tabBtn('raw', 'Raw JSON'), tabBtn('profile', 'Profile'));
    tabs.querySelector(`[data-view="${view}"]`)?.classList.add('active');
    if (error) { mount(results, errorBox(error)); return; }
    const v = value();
    let body: HTMLElement;
    if (view === 'tree') {
      body = Array.isArray(v) && !atom
        ? h('ol.rows', rows.map((x) => h('li', jsonTree(x, 1))))
        : h('div', jsonTree(v));
    } else if (view === 'table') {
      body = tableView(Array.isArray(v) ? v : [v]);
    } else if (view === 'raw') {
      body = h('pre.raw#raw', JSON.stringify(v, jsonReplacer, 2));
    } else {
      body = profile ? h('div', jsonTree(profile, 0), h('pre.raw', JSON.stringify(profile, null, 2))) : h('p.muted', 'No profile.');
    }
    mount(results, body,
      more && !feed ? h('button#more', { onclick: () => void fetchMore() }, `More results`) : null);
  }

  function queueRender(): void {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(() => { renderQueued = false; render(); });
  }

  function setRunning(on: boolean, text: string): void {
    running = on;
    runBtn.disabled = on;
    cancelBtn.disabled = !on;
    status.textContent = text;
    status.dataset.state = on ? 'running' : 'done';
  }

  async function fetchMore(): Promise<void> {
    if (!cursor) return;
    setRunning(true, 'Reading more…');
    try {
      for (let i = 0; i < PAGE; i++) rows.push(await cursor.next());
    } catch (e) {
      if (!String((e as Error).message).includes('No more rows')) error = e;
      more = false;
    }
    setRunning(false, `${rows.length} rows${more ? ' (more available)' : ''}`);
    render();
  }

  async function cancel(): Promise<void> {
    runId++;
    const c = cursor;
    const cn = conn;
    cursor = null;
    conn = null;
    if (c && typeof c.close === 'function') await c.close().catch(() => {});
    if (cn) { try { cn.cancel(); } catch { /* already closed */ } }
    if (running) setRunning(false, feed ? `Feed stopped after ${rows.length} changes` : 'Cancelled');
  }

  async function execute(): Promise<void> {
    await cancel();
    hideSuggest();
    const text = editor.value.trim();
    if (!text) return;
    rows = []; atom = null; profile = null; error = null; more = false; feed = false;
    let queries: unknown[];
    try {
      queries = evalExpressions(text, { r });
    } catch (e) {
      error = e;
      setRunning(false, 'Syntax error');
      render();
      return;
    }
    remember(text);
    renderHistory();
    const q = queries[queries.length - 1] as Any;
    if (!q || typeof q.run !== 'function') {
      atom = { value: q };
      setRunning(false, 'Not a query: the value of the expression is shown');
      render();
      return;
    }
    const started = performance.now();
    const id = runId;
    setRunning(true, 'Running…');
    render();
    try {
      conn = await connect();
      const opts: Record<string, unknown> = profileBox.checked ? { profile: true } : {};
      const res = unwrap(await q.run(conn, opts));
      if (id !== runId) return;
      profile = res.profile;
      const v = res.value;
      const ms = () => `${(performance.now() - started).toFixed(0)} ms`;
      if (v && typeof v === 'object' && typeof v.next === 'function' && typeof v.each === 'function') {
        cursor = v;
        feed = /Feed/.test(String(v)); // the driver's feed cursors say [object Feed] and the like
        if (feed) {
          setRunning(true, 'Streaming changes…');
          status.dataset.state = 'feed';
          v.each((err: Any, row: unknown) => {
            if (err) {
              if (cursor === v) { error = err; setRunning(false, 'Feed failed'); render(); }
              return false;
            }
            rows.push(row);
            status.textContent = `Streaming changes… ${rows.length} received`;
            results.dataset.count = String(rows.length);
            queueRender();
            return undefined;
          }, () => { if (cursor === v) setRunning(false, `Feed ended after ${rows.length} changes`); });
          render();
          return;
        }
        more = true;
        try {
          for (let i = 0; i < PAGE; i++) rows.push(await v.next());
        } catch (e) {
          if (!String((e as Error).message).includes('No more rows')) throw e;
          more = false;
        }
        setRunning(false, `${rows.length} rows in ${ms()}${more ? ' (more available)' : ''}`);
      } else {
        atom = { value: v };
        setRunning(false, `Answered in ${ms()}`);
      }
      results.dataset.count = String(rows.length);
    } catch (e) {
      if (id !== runId) return;
      error = e;
      setRunning(false, 'Failed');
    }
    render();
  }

  function renderHistory(): void {
    mount(histList, history().map((q) => h('li', { title: q, onclick: () => { editor.value = q; editor.focus(); } }, short(q, 70).replace(/^"|"$/g, ''))));
  }

  // Autocompletion: the word being typed after `r.` or after `).`/`name.`
  let choices: string[] = [];
  let chosen = 0;
  function currentWord(): { start: number; word: string; top: boolean } | null {
    const pos = editor.selectionStart;
    const before = editor.value.slice(0, pos);
    const m = /(\w*)\.([A-Za-z]*)$/.exec(before);
    if (!m) return null;
    return { start: pos - m[2].length, word: m[2], top: m[1] === 'r' };
  }
  function updateSuggest(): void {
    const w = currentWord();
    if (!w) { hideSuggest(); return; }
    choices = (w.top ? names.top : names.term).filter((n) => n.startsWith(w.word) && n !== w.word).slice(0, 12);
    chosen = 0;
    if (!choices.length) { hideSuggest(); return; }
    drawSuggest();
  }
  function drawSuggest(): void {
    mount(suggest, choices.map((c, i) => h('li', { class: i === chosen ? 'active' : '', onmousedown: (e: Event) => { e.preventDefault(); chosen = i; accept(); } }, c)));
    suggest.classList.remove('hidden');
  }
  function hideSuggest(): void {
    choices = [];
    suggest.classList.add('hidden');
  }
  function accept(): void {
    const w = currentWord();
    const name = choices[chosen];
    if (!w || !name) return;
    const pos = editor.selectionStart;
    const insert = `${name}(`;
    editor.setRangeText(insert, w.start, pos, 'end');
    hideSuggest();
  }

  editor.addEventListener('input', updateSuggest);
  editor.addEventListener('blur', () => setTimeout(hideSuggest, 100));
  editor.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.shiftKey || e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      void execute();
      return;
    }
    if (!choices.length) return;
    if (e.key === 'ArrowDown') { e.preventDefault(); chosen = (chosen + 1) % choices.length; drawSuggest(); }
    else if (e.key === 'ArrowUp') { e.preventDefault(); chosen = (chosen + choices.length - 1) % choices.length; drawSuggest(); }
    else if (e.key === 'Tab' || e.key === 'Enter') { e.preventDefault(); accept(); }
    else if (e.key === 'Escape') { hideSuggest(); }
  });
  runBtn.addEventListener('click', () => void execute());
  cancelBtn.addEventListener('click', () => void cancel());

  renderHistory();
  render();
  const el = h('div.explorer',
    h('h1', 'Data Explorer'),
    h('div.explorer-grid',
      h('div',
        h('div.editor-wrap', editor, suggest),
        h('div.row', runBtn, cancelBtn, h('label', profileBox, ' full profile'), h('span.spacer'), status),
        tabs,
        results),
      h('aside.card', h('h2', 'History'), histList,
        h('button.small', { onclick: () => { localStorage.removeItem(HISTORY_KEY); renderHistory(); } }, 'Clear history'))));
  return { el, stop: () => void cancel() };
}

function tableView(items: unknown[]): HTMLElement {
  const objs = items.every((x) => x && typeof x === 'object' && !Array.isArray(x) && !(x instanceof Date));
  if (!objs || !items.length) {
    return h('table.grid', h('thead', h('tr', h('th', 'value'))),
      h('tbody', items.map((x) => h('tr', h('td', short(x, 200))))));
  }
  const cols = [...new Set(items.flatMap((x) => Object.keys(x as object)))];
  return h('table.grid', h('thead', h('tr', cols.map((c) => h('th', c)))),
    h('tbody', items.map((x) => h('tr', cols.map((c) => h('td', c in (x as object) ? short((x as Record<string, unknown>)[c], 80) : ''))))));
}
