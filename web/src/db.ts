// The console's link to the server: the official `rethinkdb` JavaScript driver over its
// HTTP connection (`/ajax/reql/`, as RethinkDB's own console used it), plus Ponder's
// login (`/ajax/session`, `/ajax/login`, `/ajax/logout`).
//
// While a login is in force, every `/ajax/` request must carry the session's CSRF
// token in `X-Ponder-Token`; the driver's XMLHttpRequests do not know that, so `send`
// is wrapped to add it. A 401/403 answer means the session ended: the page goes back
// to the login form and the queries waiting on it fail.
import rImport from 'rethinkdb';

// The driver's typings are not shipped; the console treats it as dynamic.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Any = any;
export const r: Any = rImport;

export interface SessionInfo {
  login_required: boolean;
  user: string | null;
  token: string | null;
}

let csrf: string | null = null;
let onAuthLost: () => void = () => {};
const inFlight = new Set<(e: Error) => void>();

/** Calls `f` when the server says the login is missing or over. */
export function setAuthLostHandler(f: () => void): void {
  onAuthLost = f;
}

const xhrUrls = new WeakMap<XMLHttpRequest, string>();
const origOpen = XMLHttpRequest.prototype.open;
const origSend = XMLHttpRequest.prototype.send;
XMLHttpRequest.prototype.open = function (this: XMLHttpRequest, ...args: Any[]) {
  xhrUrls.set(this, String(args[1]));
  return (origOpen as Any).apply(this, args);
} as Any;
XMLHttpRequest.prototype.send = function (this: XMLHttpRequest, body?: Any) {
  const url = xhrUrls.get(this) ?? '';
  if (url.includes('/ajax/')) {
    if (csrf) this.setRequestHeader('X-Ponder-Token', csrf);
    this.addEventListener('load', () => {
      if (this.status === 401 || this.status === 403) authLost();
    });
  }
  return origSend.call(this, body);
};

function authLost(): void {
  csrf = null;
  dropConnection();
  for (const reject of inFlight) reject(new Error('Not logged in (the session ended).'));
  inFlight.clear();
  onAuthLost();
}

/** What `/ajax/session` says: whether a login is needed and who is logged in. */
export async function session(): Promise<SessionInfo> {
  const res = await fetch('/ajax/session', { credentials: 'same-origin' });
  const info = (await res.json()) as SessionInfo;
  csrf = info.token;
  return info;
}

/** Logs in; resolves to an error text, or null on success. */
export async function login(user: string, password: string): Promise<string | null> {
  const res = await fetch('/ajax/login', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ user, password }),
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) return body.error ?? `Login failed (HTTP ${res.status})`;
  csrf = body.token;
  dropConnection();
  return null;
}

/** Ends the session. */
export async function logout(): Promise<void> {
  await fetch('/ajax/logout', {
    method: 'POST',
    credentials: 'same-origin',
    headers: csrf ? { 'X-Ponder-Token': csrf } : {},
  });
  csrf = null;
  dropConnection();
}

let connPromise: Promise<Any> | null = null;

/** Opens a new HTTP connection (one per long-running feed, so it can be closed alone). */
export function connect(): Promise<Any> {
  const https = location.protocol === 'https:';
  return r.connect({
    host: location.hostname,
    port: Number(location.port) || (https ? 443 : 80),
    protocol: https ? 'https' : 'http',
    pathname: '/',
  });
}

/** The shared connection of the console's own queries. */
export function conn(): Promise<Any> {
  if (!connPromise) {
    connPromise = connect();
    connPromise.catch(() => { connPromise = null; });
  }
  return connPromise;
}

function dropConnection(): void {
  const p = connPromise;
  connPromise = null;
  p?.then((c: Any) => c.close({ noreplyWait: false }).catch(() => {}), () => {});
}

/** The driver answers `{profile, value}` whenever the server sends a profile, which
 * the HTTP endpoint always does (the query's duration). */
export function unwrap(res: Any): { value: Any; profile: Any } {
  if (res && typeof res === 'object' && 'profile' in res && 'value' in res && Object.keys(res).length === 2) {
    return { value: res.value, profile: res.profile };
  }
  return { value: res, profile: null };
}

/** Runs `query` on the shared connection and returns its whole result (a sequence
 * is read to its end), failing if the session ends meanwhile. */
export async function run<T = Any>(query: Any, opts: Record<string, unknown> = {}): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    inFlight.add(reject);
    (async () => {
      try {
        const c = await conn();
        let value: Any;
        try {
          value = unwrap(await query.run(c, opts)).value;
        } catch (e) {
          // A connection the server forgot (expired, restarted) is opened anew once.
          if (String((e as Error).message).includes('connection is not open')) {
            dropConnection();
            value = unwrap(await query.run(await conn(), opts)).value;
          } else {
            throw e;
          }
        }
        if (value && typeof value.toArray === 'function') value = await value.toArray();
        resolve(value as T);
      } catch (e) {
        reject(e);
      } finally {
        inFlight.delete(reject);
      }
    })();
  });
}
