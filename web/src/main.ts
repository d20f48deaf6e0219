// The console's entry: asks `/ajax/session` whether a login is needed, then routes
// `#/...` to the pages. Each page builds its element and may return a `stop` that
// ends its timers and feeds when the user leaves it.
import { logout, session, setAuthLostHandler } from './db';
import { h, mount } from './ui';
import { loginPage } from './pages/login';
import { dashboardPage } from './pages/dashboard';
import { tablesPage, tablePage } from './pages/tables';
import { serversPage, serverPage } from './pages/servers';
import { logsPage } from './pages/logs';
import { explorerPage } from './pages/explorer';

/** A page: its element and what to do when it is left. */
export interface Page {
  el: HTMLElement;
  stop?: () => void;
}

const NAV: [string, string][] = [
  ['#/', 'Dashboard'],
  ['#/tables', 'Tables'],
  ['#/servers', 'Servers'],
  ['#/logs', 'Logs'],
  ['#/explorer', 'Data Explorer'],
];

let current: Page | null = null;
let user: string | null = null;
let needsLogin = false;

function route(hash: string): Page {
  const parts = hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  switch (parts[0]) {
    case '': return dashboardPage();
    case 'tables': return parts.length >= 3 ? tablePage(parts[1], parts[2]) : tablesPage();
    case 'servers': return parts.length >= 2 ? serverPage(parts[1]) : serversPage();
    case 'logs': return logsPage();
    case 'explorer': return explorerPage();
    default: return { el: h('div', h('h1', 'Not found'), h('p', `No page at ${hash}.`)) };
  }
}

function shell(): HTMLElement {
  const hash = location.hash || '#/';
  const active = (href: string) => (href === '#/' ? hash === '#/' || hash === '' : hash.startsWith(href));
  return h('header.top',
    h('a.brand', { href: '#/' }, 'Ponder'),
    h('nav', NAV.map(([href, label]) => h('a', { href, class: active(href) ? 'active' : '' }, label))),
    h('span.spacer'),
    needsLogin && user
      ? h('span.who', `${user} · `, h('button.link#logout', {
        onclick: async () => { await logout(); await start(); },
      }, 'Log out'))
      : null);
}

function render(): void {
  current?.stop?.();
  current = route(location.hash || '#/');
  mount(document.body, shell(), h('main', current.el));
}

async function start(): Promise<void> {
  current?.stop?.();
  current = null;
  let info;
  try {
    info = await session();
  } catch (e) {
    mount(document.body, h('main', h('div.error', `The server did not answer: ${String(e)}`)));
    return;
  }
  needsLogin = info.login_required;
  user = info.user;
  if (info.login_required && !info.user) {
    current = loginPage(() => { void start(); });
    mount(document.body, h('main.center', current.el));
    return;
  }
  render();
}

setAuthLostHandler(() => { void start(); });
window.addEventListener('hashchange', () => { if (!needsLogin || user) render(); });
void start();
