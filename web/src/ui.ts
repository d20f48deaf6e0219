// Small DOM helpers shared by the pages: element building, tables, the JSON tree,
// time formatting and the canvas line chart. No inline styles or scripts anywhere:
// the HTTP admin's Content-Security-Policy allows only the bundled files.

type Child = Node | string | number | null | undefined | false | Child[];
type Attrs = Record<string, unknown>;

/** `h('div.card#id', {onclick, ...}, children...)`: an element. Attributes starting
 * with `on` are listeners; `class` adds classes; others are set as attributes (or as
 * properties for `value` and `checked`). */
type TagOf<S extends string> = S extends `${infer T}#${string}` ? TagOf<T> : S extends `${infer T}.${string}` ? T : S;
type ElementOf<S extends string> = TagOf<S> extends keyof HTMLElementTagNameMap ? HTMLElementTagNameMap[TagOf<S>] : HTMLElement;

export function h<S extends string>(spec: S, attrs?: Attrs | Child, ...children: Child[]): ElementOf<S> {
  const m = /^([a-z0-9]+)((?:[.#][\w-]+)*)$/.exec(spec)!;
  const el = document.createElement(m[1]) as ElementOf<S>;
  for (const part of m[2].match(/[.#][\w-]+/g) ?? []) {
    if (part[0] === '.') el.classList.add(part.slice(1));
    else el.id = part.slice(1);
  }
  if (attrs && typeof attrs === 'object' && !(attrs instanceof Node) && !Array.isArray(attrs)) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v as EventListener);
      else if (k === 'class') for (const c of String(v).split(/\s+/).filter(Boolean)) el.classList.add(c);
      else if (k === 'value' || k === 'checked') (el as unknown as Record<string, unknown>)[k] = v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  } else if (attrs !== undefined) {
    children.unshift(attrs as Child);
  }
  append(el, children);
  return el;
}

function append(el: Node, c: Child): void {
  if (c === null || c === undefined || c === false) return;
  if (Array.isArray(c)) c.forEach((x) => append(el, x));
  else el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
}

/** Replaces `el`'s children. */
export function mount(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

/** A table with a header row. */
export function table(headers: string[], rows: Child[][], cls = ''): HTMLTableElement {
  return h('table', { class: `grid ${cls}` },
    h('thead', h('tr', headers.map((x) => h('th', x)))),
    h('tbody', rows.length ? rows.map((row) => h('tr', row.map((c) => h('td', c))))
      : h('tr', h('td.empty', { colspan: headers.length }, 'None'))));
}

/** An error line. */
export function errorBox(e: unknown): HTMLElement {
  return h('div.error', e instanceof Error ? e.message : String(e));
}

/** A value as one line of JSON, shortened. */
export function short(v: unknown, max = 80): string {
  const s = v === undefined ? 'undefined' : JSON.stringify(v, jsonReplacer);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** Shows TIME objects (Date) and binary data readably in JSON. */
export function jsonReplacer(this: unknown, key: string, v: unknown): unknown {
  const raw = (this as Record<string, unknown>)[key];
  if (raw instanceof Date) return raw.toISOString();
  if (v && typeof v === 'object' && (v as { type?: string }).type === 'Buffer' && Array.isArray((v as { data?: unknown }).data)) {
    return `<binary, ${(v as { data: unknown[] }).data.length} bytes>`;
  }
  return v;
}

/** A collapsible tree of a JSON value. */
export function jsonTree(v: unknown, depth = 0): HTMLElement {
  if (v instanceof Date) return h('span.j-str', v.toISOString());
  if (v === null || typeof v !== 'object') {
    const cls = v === null ? 'j-null' : `j-${typeof v}`;
    return h('span', { class: cls }, typeof v === 'string' ? JSON.stringify(v) : String(v));
  }
  const entries: [string, unknown][] = Array.isArray(v) ? v.map((x, i) => [String(i), x]) : Object.entries(v as object);
  const open = Array.isArray(v) ? '[' : '{';
  const close = Array.isArray(v) ? ']' : '}';
  if (!entries.length) return h('span', open + close);
  const details = h('details.j-node', { open: depth < 2 });
  details.append(h('summary', `${open} ${entries.length} ${Array.isArray(v) ? 'items' : 'keys'} ${close}`));
  details.append(h('ul.j-list', entries.map(([k, x]) => h('li', h('span.j-key', k), ': ', jsonTree(x, depth + 1)))));
  return details;
}

/** Seconds as "3d 4h", "5m 2s"... */
export function duration(sec: number): string {
  const parts: string[] = [];
  const units: [string, number][] = [['d', 86400], ['h', 3600], ['m', 60], ['s', 1]];
  for (const [u, n] of units) {
    if (sec >= n || (u === 's' && !parts.length)) {
      parts.push(`${Math.floor(sec / n)}${u}`);
      sec %= n;
    }
    if (parts.length === 2) break;
  }
  return parts.join(' ');
}

/** A rolling line chart on a canvas: one line per series, the last `points` values. */
export class LineChart {
  readonly el: HTMLElement;
  private canvas: HTMLCanvasElement;
  private data: number[][];
  private legend: HTMLElement;

  constructor(private names: string[], private colors: string[], private points = 60) {
    this.canvas = h('canvas', { width: 600, height: 160, class: 'chart' });
    this.data = names.map(() => []);
    this.legend = h('div.legend');
    this.el = h('div.chart-box', this.canvas, this.legend);
    this.draw();
  }

  /** Adds one value per series and redraws. */
  push(values: number[]): void {
    values.forEach((v, i) => {
      this.data[i].push(v);
      if (this.data[i].length > this.points) this.data[i].shift();
    });
    this.draw();
  }

  /** The number of values pushed that are still shown (for the tests). */
  get length(): number {
    return this.data[0]?.length ?? 0;
  }

  private draw(): void {
    const c = this.canvas;
    const ratio = window.devicePixelRatio || 1;
    const w = c.clientWidth || 600;
    const hgt = c.clientHeight || 160;
    if (c.width !== Math.round(w * ratio)) { c.width = Math.round(w * ratio); c.height = Math.round(hgt * ratio); }
    const g = c.getContext('2d');
    if (!g) return;
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, w, hgt);
    const max = Math.max(1, ...this.data.flat());
    const top = niceCeil(max);
    const left = 40;
    const bottom = hgt - 16;
    g.strokeStyle = '#d8dde6';
    g.fillStyle = '#6b7280';
    g.font = '11px system-ui, sans-serif';
    g.lineWidth = 1;
    for (let i = 0; i <= 4; i++) {
      const y = 6 + ((bottom - 6) * i) / 4;
      g.beginPath(); g.moveTo(left, y); g.lineTo(w - 4, y); g.stroke();
      g.fillText(formatNum((top * (4 - i)) / 4), 2, y + 4);
    }
    g.fillText(`last ${this.points} s`, left, hgt - 2);
    const step = (w - 4 - left) / (this.points - 1);
    this.data.forEach((series, si) => {
      g.strokeStyle = this.colors[si];
      g.lineWidth = 2;
      g.beginPath();
      const offset = this.points - series.length;
      series.forEach((v, i) => {
        const x = left + (offset + i) * step;
        const y = bottom - ((bottom - 6) * v) / top;
        if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
      });
      g.stroke();
      if (series.length === 1) g.strokeRect(left + offset * step - 1, bottom - ((bottom - 6) * series[0]) / top - 1, 2, 2);
    });
    mount(this.legend, this.names.map((n, i) => {
      const last = this.data[i][this.data[i].length - 1] ?? 0;
      const sw = h('span.swatch');
      sw.style.background = this.colors[i];
      return h('span.legend-item', sw, `${n}: `, h('b', { 'data-series': n }, formatNum(last)), '/s');
    }));
  }
}

function niceCeil(v: number): number {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/** 1234.5 → "1.2k". */
export function formatNum(v: number): string {
  if (v >= 1e6) return `${(v / 1e6).toFixed(1)}M`;
  if (v >= 1e3) return `${(v / 1e3).toFixed(1)}k`;
  return Number.isInteger(v) ? String(v) : String(Number(v.toFixed(v < 10 ? 2 : 1)));
}
