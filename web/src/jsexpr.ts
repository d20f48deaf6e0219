// A small interpreter for the JavaScript expressions the Data Explorer accepts
// (`r.db('test').table('x').filter(function (d) { return d('n').gt(1); })`).
//
// The console cannot use `eval` or `new Function`: the HTTP admin's Content-Security-
// Policy forbids them, which is what keeps a page from running text it did not ship.
// So the user's text is parsed here and evaluated with only `r` (and the functions'
// own parameters) in scope: literals, arrays, objects, member access, calls, unary and
// binary operators, `?:`, arrow functions and `function (...) { return ...; }`.
// Functions become real JavaScript functions with the right `length`, because the
// driver reads a function's arity to build ReQL's FUNC term.

type Node =
  | { k: 'lit'; v: unknown }
  | { k: 'id'; name: string }
  | { k: 'arr'; items: Node[] }
  | { k: 'obj'; props: [string, Node][] }
  | { k: 'member'; obj: Node; prop: Node }
  | { k: 'call'; callee: Node; args: Node[] }
  | { k: 'unary'; op: string; arg: Node }
  | { k: 'bin'; op: string; l: Node; r: Node }
  | { k: 'cond'; test: Node; yes: Node; no: Node }
  | { k: 'fn'; params: string[]; body: Node }
  | { k: 'new'; callee: Node; args: Node[] };

interface Tok {
  t: 'num' | 'str' | 'id' | 'op' | 'eof';
  v: string;
  pos: number;
}

/** A syntax or evaluation error in the user's text, with its position when known. */
export class ExprError extends Error {}

const OPS = [
  '===', '!==', '=>', '==', '!=', '<=', '>=', '&&', '||', '??',
  '(', ')', '[', ']', '{', '}', '.', ',', ':', ';', '?', '+', '-', '*', '/', '%', '<', '>', '!',
];

function tokenize(src: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (/\s/.test(c)) { i++; continue; }
    if (src.startsWith('//', i)) { while (i < src.length && src[i] !== '\n') i++; continue; }
    if (src.startsWith('/*', i)) {
      const end = src.indexOf('*/', i + 2);
      i = end < 0 ? src.length : end + 2;
      continue;
    }
    const start = i;
    if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(src[i + 1] ?? ''))) {
      const m = /^(0[xX][0-9a-fA-F]+|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)/.exec(src.slice(i));
      if (!m) throw new ExprError(`Bad number at ${i}`);
      out.push({ t: 'num', v: m[0], pos: start });
      i += m[0].length;
      continue;
    }
    if (c === '"' || c === "'" || c === '`') {
      let s = '';
      i++;
      while (i < src.length && src[i] !== c) {
        if (src[i] === '\\') {
          const e = src[i + 1];
          const map: Record<string, string> = { n: '\n', t: '\t', r: '\r', b: '\b', f: '\f', v: '\v', 0: '\0' };
          if (e === 'u') {
            s += String.fromCharCode(parseInt(src.slice(i + 2, i + 6), 16));
            i += 6;
            continue;
          }
          s += map[e] ?? e;
          i += 2;
          continue;
        }
        if (c === '`' && src.startsWith('${', i)) throw new ExprError('Template substitutions are not supported');
        s += src[i++];
      }
      if (i >= src.length) throw new ExprError(`Unterminated string starting at ${start}`);
      i++;
      out.push({ t: 'str', v: s, pos: start });
      continue;
    }
    if (/[A-Za-z_$]/.test(c)) {
      const m = /^[A-Za-z_$][A-Za-z0-9_$]*/.exec(src.slice(i))!;
      out.push({ t: 'id', v: m[0], pos: start });
      i += m[0].length;
      continue;
    }
    const op = OPS.find((o) => src.startsWith(o, i));
    if (!op) throw new ExprError(`Unexpected character '${c}' at ${i}`);
    out.push({ t: 'op', v: op, pos: start });
    i += op.length;
  }
  out.push({ t: 'eof', v: '', pos: src.length });
  return out;
}

const BINARY: Record<string, number> = {
  '??': 1, '||': 2, '&&': 3, '==': 4, '!=': 4, '===': 4, '!==': 4,
  '<': 5, '>': 5, '<=': 5, '>=': 5, '+': 6, '-': 6, '*': 7, '/': 7, '%': 7,
};

class Parser {
  private i = 0;
  constructor(private toks: Tok[]) {}

  private peek(o = 0): Tok { return this.toks[Math.min(this.i + o, this.toks.length - 1)]; }
  private next(): Tok { return this.toks[this.i++]; }
  private is(v: string, o = 0): boolean { const t = this.peek(o); return t.t === 'op' && t.v === v; }
  private isId(v: string): boolean { const t = this.peek(); return t.t === 'id' && t.v === v; }
  private eat(v: string): Tok {
    const t = this.next();
    if (t.t !== 'op' || t.v !== v) throw new ExprError(`Expected '${v}' at ${t.pos}${t.t === 'eof' ? ' (end of input)' : `, found '${t.v}'`}`);
    return t;
  }

  /** Statements separated by `;`: each is one query. */
  program(): Node[] {
    const out: Node[] = [];
    while (this.peek().t !== 'eof') {
      if (this.is(';')) { this.next(); continue; }
      out.push(this.expr());
      if (!this.is(';') && this.peek().t !== 'eof') {
        const t = this.peek();
        throw new ExprError(`Unexpected '${t.v}' at ${t.pos}`);
      }
    }
    return out;
  }

  expr(): Node {
    const arrow = this.tryArrow();
    if (arrow) return arrow;
    const test = this.binary(0);
    if (this.is('?')) {
      this.next();
      const yes = this.expr();
      this.eat(':');
      const no = this.expr();
      return { k: 'cond', test, yes, no };
    }
    return test;
  }

  private tryArrow(): Node | null {
    const t = this.peek();
    if (t.t === 'id' && this.is('=>', 1)) {
      this.i += 2;
      return { k: 'fn', params: [t.v], body: this.fnBody() };
    }
    if (!this.is('(')) return null;
    // (a, b) => ...: scan to the matching ')' and look for '=>'.
    let j = 1;
    const params: string[] = [];
    for (;;) {
      const p = this.peek(j);
      if (p.t === 'op' && p.v === ')') break;
      if (p.t !== 'id') return null;
      params.push(p.v);
      j++;
      if (this.is(',', j)) { j++; continue; }
      if (!this.is(')', j)) return null;
    }
    if (!this.is('=>', j + 1)) return null;
    this.i += j + 2;
    return { k: 'fn', params, body: this.fnBody() };
  }

  private fnBody(): Node {
    if (!this.is('{')) return this.expr();
    this.next();
    const t = this.next();
    if (t.t !== 'id' || t.v !== 'return') throw new ExprError(`A function body must be 'return <expression>' (at ${t.pos})`);
    const body = this.expr();
    if (this.is(';')) this.next();
    this.eat('}');
    return body;
  }

  private binary(minPrec: number): Node {
    let l = this.unary();
    for (;;) {
      const t = this.peek();
      const prec = t.t === 'op' ? BINARY[t.v] : undefined;
      if (prec === undefined || prec <= minPrec) return l;
      this.next();
      const r = this.binary(prec);
      l = { k: 'bin', op: t.v, l, r };
    }
  }

  private unary(): Node {
    if (this.is('!') || this.is('-') || this.is('+')) {
      const op = this.next().v;
      return { k: 'unary', op, arg: this.unary() };
    }
    if (this.isId('typeof')) { this.next(); return { k: 'unary', op: 'typeof', arg: this.unary() }; }
    return this.postfix(this.primary());
  }

  private postfix(n: Node): Node {
    for (;;) {
      if (this.is('.')) {
        this.next();
        const t = this.next();
        if (t.t !== 'id') throw new ExprError(`Expected a property name at ${t.pos}`);
        n = { k: 'member', obj: n, prop: { k: 'lit', v: t.v } };
      } else if (this.is('[')) {
        this.next();
        const prop = this.expr();
        this.eat(']');
        n = { k: 'member', obj: n, prop };
      } else if (this.is('(')) {
        n = { k: 'call', callee: n, args: this.args() };
      } else {
        return n;
      }
    }
  }

  private args(): Node[] {
    this.eat('(');
    const args: Node[] = [];
    while (!this.is(')')) {
      args.push(this.expr());
      if (!this.is(')')) this.eat(',');
    }
    this.eat(')');
    return args;
  }

  private primary(): Node {
    const t = this.next();
    switch (t.t) {
      case 'num': return { k: 'lit', v: Number(t.v) };
      case 'str': return { k: 'lit', v: t.v };
      case 'id':
        switch (t.v) {
          case 'true': return { k: 'lit', v: true };
          case 'false': return { k: 'lit', v: false };
          case 'null': return { k: 'lit', v: null };
          case 'undefined': return { k: 'lit', v: undefined };
          case 'function': return this.functionExpr();
          case 'new': {
            const callee = this.primary();
            return { k: 'new', callee, args: this.is('(') ? this.args() : [] };
          }
          default: return { k: 'id', name: t.v };
        }
      case 'op':
        if (t.v === '(') { const e = this.expr(); this.eat(')'); return e; }
        if (t.v === '[') {
          const items: Node[] = [];
          while (!this.is(']')) {
            items.push(this.expr());
            if (!this.is(']')) this.eat(',');
          }
          this.eat(']');
          return { k: 'arr', items };
        }
        if (t.v === '{') {
          const props: [string, Node][] = [];
          while (!this.is('}')) {
            const key = this.next();
            if (key.t !== 'id' && key.t !== 'str' && key.t !== 'num') throw new ExprError(`Expected a key at ${key.pos}`);
            if (key.t === 'id' && (this.is(',') || this.is('}'))) {
              props.push([key.v, { k: 'id', name: key.v }]);
            } else {
              this.eat(':');
              props.push([key.v, this.expr()]);
            }
            if (!this.is('}')) this.eat(',');
          }
          this.eat('}');
          return { k: 'obj', props };
        }
        throw new ExprError(`Unexpected '${t.v}' at ${t.pos}`);
      default:
        throw new ExprError(`Unexpected end of input`);
    }
  }

  private functionExpr(): Node {
    if (this.peek().t === 'id') this.next(); // an optional name
    this.eat('(');
    const params: string[] = [];
    while (!this.is(')')) {
      const p = this.next();
      if (p.t !== 'id') throw new ExprError(`Expected a parameter name at ${p.pos}`);
      params.push(p.v);
      if (!this.is(')')) this.eat(',');
    }
    this.eat(')');
    if (!this.is('{')) throw new ExprError(`Expected '{' after function parameters`);
    return { k: 'fn', params, body: this.fnBody() };
  }
}

type Scope = Map<string, unknown>;

// Only these globals exist besides `r`: nothing reaches the page itself.
const GLOBALS: Record<string, unknown> = { Date, Math, JSON, Infinity, NaN };

function lookup(scope: Scope, name: string): unknown {
  if (scope.has(name)) return scope.get(name);
  if (Object.prototype.hasOwnProperty.call(GLOBALS, name)) return GLOBALS[name];
  throw new ExprError(`${name} is not defined`);
}

const FORBIDDEN = new Set(['constructor', '__proto__', 'prototype', '__defineGetter__', '__defineSetter__', '__lookupGetter__']);

function getProp(obj: unknown, key: unknown): unknown {
  if (obj === null || obj === undefined) throw new ExprError(`Cannot read property '${String(key)}' of ${obj}`);
  const k = String(key);
  if (FORBIDDEN.has(k)) throw new ExprError(`Property '${k}' is not available here`);
  return (obj as Record<string, unknown>)[k];
}

function evaluate(n: Node, scope: Scope): unknown {
  switch (n.k) {
    case 'lit': return n.v;
    case 'id': return lookup(scope, n.name);
    case 'arr': return n.items.map((x) => evaluate(x, scope));
    case 'obj': {
      const o: Record<string, unknown> = {};
      for (const [k, v] of n.props) {
        if (FORBIDDEN.has(k)) throw new ExprError(`Key '${k}' is not allowed`);
        o[k] = evaluate(v, scope);
      }
      return o;
    }
    case 'member': return getProp(evaluate(n.obj, scope), evaluate(n.prop, scope));
    case 'call': {
      let self: unknown;
      let f: unknown;
      if (n.callee.k === 'member') {
        self = evaluate(n.callee.obj, scope);
        f = getProp(self, evaluate(n.callee.prop, scope));
      } else {
        f = evaluate(n.callee, scope);
      }
      if (typeof f !== 'function') throw new ExprError(`${describe(n.callee)} is not a function`);
      if (f === Function || f === Function.prototype.constructor) throw new ExprError('Function is not available here');
      // The driver's terms are callable objects whose prototype is not Function's.
      return Reflect.apply(f as (...a: unknown[]) => unknown, self, n.args.map((a) => evaluate(a, scope)));
    }
    case 'new': {
      const C = evaluate(n.callee, scope);
      if (C !== Date) throw new ExprError('Only `new Date(...)` is supported');
      return new (Date as unknown as new (...a: unknown[]) => Date)(...n.args.map((a) => evaluate(a, scope)));
    }
    case 'unary': {
      const v = evaluate(n.arg, scope);
      switch (n.op) {
        case '!': return !v;
        case '-': return -(v as number);
        case '+': return +(v as number);
        default: return typeof v;
      }
    }
    case 'bin': {
      if (n.op === '&&') return evaluate(n.l, scope) && evaluate(n.r, scope);
      if (n.op === '||') return evaluate(n.l, scope) || evaluate(n.r, scope);
      if (n.op === '??') return evaluate(n.l, scope) ?? evaluate(n.r, scope);
      const a = evaluate(n.l, scope) as never;
      const b = evaluate(n.r, scope) as never;
      switch (n.op) {
        case '+': return (a as number) + (b as number);
        case '-': return a - b;
        case '*': return a * b;
        case '/': return a / b;
        case '%': return a % b;
        // eslint-disable-next-line eqeqeq
        case '==': return a == b;
        // eslint-disable-next-line eqeqeq
        case '!=': return a != b;
        case '===': return a === b;
        case '!==': return a !== b;
        case '<': return a < b;
        case '>': return a > b;
        case '<=': return a <= b;
        default: return a >= b;
      }
    }
    case 'cond': return evaluate(n.test, scope) ? evaluate(n.yes, scope) : evaluate(n.no, scope);
    case 'fn': {
      const { params, body } = n;
      const f = (...args: unknown[]) => {
        const inner = new Map(scope);
        params.forEach((p, i) => inner.set(p, args[i]));
        return evaluate(body, inner);
      };
      Object.defineProperty(f, 'length', { value: params.length });
      return f;
    }
  }
}

function describe(n: Node): string {
  if (n.k === 'id') return n.name;
  if (n.k === 'member' && n.prop.k === 'lit') return `${describe(n.obj)}.${String(n.prop.v)}`;
  return 'expression';
}

/** Parses `src` into its statements and evaluates each with `globals` in scope. */
export function evalExpressions(src: string, globals: Record<string, unknown>): unknown[] {
  const nodes = new Parser(tokenize(src)).program();
  const scope: Scope = new Map(Object.entries(globals));
  return nodes.map((n) => evaluate(n, scope));
}
