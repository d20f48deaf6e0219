// The login form, shown while `admin` has a password and this browser has no session.
import { login } from '../db';
import { h } from '../ui';
import type { Page } from '../main';

/** The login page; `done` is called once logged in. */
export function loginPage(done: () => void): Page {
  const userIn = h('input#login-user', { name: 'user', value: 'admin', autocomplete: 'username' });
  const passIn = h('input#login-password', { name: 'password', type: 'password', autocomplete: 'current-password' });
  const msg = h('div.error.hidden#login-error');
  const form = h('form.card.login', {
    onsubmit: async (e: Event) => {
      e.preventDefault();
      msg.classList.add('hidden');
      const err = await login(userIn.value, passIn.value);
      if (err) {
        msg.textContent = err;
        msg.classList.remove('hidden');
        passIn.select();
      } else {
        done();
      }
    },
  },
  h('h1', 'Ponder'),
  h('p.muted', 'This server asks for a login.'),
  h('label', 'User', userIn),
  h('label', 'Password', passIn),
  msg,
  h('button.primary#login-submit', { type: 'submit' }, 'Log in'));
  setTimeout(() => passIn.focus(), 0);
  return { el: form };
}
