// The Warren management UI: a hash-routed single page that talks only to
// the management API (/api/...). See docs/ui.md.

import * as api from './api.js';
import { h, clear, notify } from './dom.js';
import { form } from './forms.js';
import overview from './pages/overview.js';
import { connections, connection } from './pages/connections.js';
import { channels, channel } from './pages/channels.js';
import { exchanges, exchange } from './pages/exchanges.js';
import { queues, queue } from './pages/queues.js';
import * as admin from './pages/admin.js';

const main = document.getElementById('main');
const header = document.getElementById('header');
const footer = document.getElementById('footer');

// Tabs: RabbitMQ's names, and who sees them (RabbitMQ's tag rules).
const TABS = [
  { id: 'overview', title: 'Overview', href: '#/' },
  { id: 'connections', title: 'Connections', href: '#/connections' },
  { id: 'channels', title: 'Channels', href: '#/channels' },
  { id: 'exchanges', title: 'Exchanges', href: '#/exchanges' },
  { id: 'queues', title: 'Queues', href: '#/queues' },
  // Streams and consumer groups: not until Warren has streams.
  { id: 'admin', title: 'Admin', href: '#/admin', show: (u) => u.is('administrator') || u.is('policymaker') },
];

// Routes: the first hash segment, then the page's own.
const ROUTES = {
  '': [overview],
  connections: [connections, connection],
  channels: [channels, channel],
  exchanges: [exchanges, null, exchange],
  queues: [queues, null, queue],
  admin: [admin.route],
};

export const state = {
  user: null, // {name, tags, is(tag)}
  vhost: sessionStorage.getItem('warren.vhost') || '',
  overview: null,
  page: null, // the mounted page: {refresh}
};

let timer = null;

function whoamiUser(w) {
  const tags = Array.isArray(w.tags) ? w.tags : String(w.tags || '').split(',').filter(Boolean);
  return {
    name: w.name,
    tags,
    is(tag) {
      // administrator implies monitoring and policymaker, as in RabbitMQ.
      if (tags.includes(tag) || tags.includes('administrator')) return true;
      return false;
    },
  };
}

function showLogin(message) {
  stopTimer();
  header.hidden = true;
  footer.hidden = true;
  document.getElementById('alarm').hidden = true;
  document.title = 'Warren Management: log in';
  const f = form({
    id: 'login',
    cls: 'login-form',
    fields: [
      { name: 'username', label: 'Username', required: true, autocomplete: 'username', keys: ['Login failed'] },
      { name: 'password', label: 'Password', type: 'password', autocomplete: 'current-password', keys: [] },
    ],
    submit: 'Login',
    async onSubmit(v) {
      const w = await api.login(v.username, v.password);
      state.user = whoamiUser(w);
      start();
    },
  });
  clear(main, h('div', { class: 'login' },
    h('div', { class: 'login-brand' }, h('span', { class: 'logo', 'aria-hidden': 'true' }), 'Warren'),
    h('h1', null, 'Management'),
    message ? h('div', { class: 'field-error form-error', role: 'alert' }, message) : null,
    f.el));
  f.controls.username.focus();
}

function logout() {
  api.clearCredentials();
  for (const k of Object.keys(sessionStorage)) if (k.startsWith('warren.')) sessionStorage.removeItem(k);
  // A fresh document: nothing of the session stays in memory either.
  location.replace('/');
}

function stopTimer() {
  if (timer) clearInterval(timer);
  timer = null;
}

function startTimer() {
  stopTimer();
  const secs = Number(document.getElementById('refresh').value);
  sessionStorage.setItem('warren.refresh', String(secs));
  if (secs > 0) timer = setInterval(tick, secs * 1000);
}

async function tick() {
  if (document.hidden) return;
  await Promise.allSettled([refreshHeader(), state.page && state.page.refresh && state.page.refresh()]);
}

async function refreshHeader() {
  try {
    state.overview = await api.get('/api/overview');
  } catch {
    return;
  }
  const o = state.overview;
  clear(document.getElementById('facts'),
    h('span', null, 'Cluster ', h('b', null, o.cluster_name)),
    h('span', null, `${o.product_name} ${o.product_version}`));
  document.getElementById('version').textContent = `${o.product_name} ${o.product_version}`;
  const alarm = document.getElementById('alarm');
  try {
    await api.get('/api/health/checks/alarms');
    alarm.hidden = true;
  } catch (e) {
    if (e.status === 503) {
      alarm.hidden = false;
      alarm.textContent = '';
      alarm.append(h('b', null, 'Resource alarm: '), 'publishers are blocked (', e.reason, '). See the node on the Overview page.');
    }
  }
}

async function refreshVHosts() {
  const sel = document.getElementById('vhost');
  let vs = [];
  try { vs = await api.get('/api/vhosts'); } catch { return; }
  const names = vs.map((v) => v.name).sort();
  if (state.vhost && !names.includes(state.vhost)) state.vhost = '';
  clear(sel, h('option', { value: '' }, 'All'), names.map((n) => h('option', { value: n, selected: n === state.vhost }, n)));
  state.vhosts = names;
}

function renderTabs(active) {
  clear(document.getElementById('tabs'), h('ul', null, TABS.filter((t) => !t.show || t.show(state.user)).map((t) =>
    h('li', null, h('a', { href: t.href, class: t.id === active ? 'active' : null, 'aria-current': t.id === active ? 'page' : null }, t.title)))));
}

let routeSeq = 0;

async function route() {
  if (!state.user) return;
  const mine = ++routeSeq;
  const segs = location.hash.replace(/^#\/?/, '').split('/').filter((s, i) => s !== '' || i > 0).map((s) => decodeURIComponent(s));
  const top = segs[0] || '';
  const pages = ROUTES[top];
  const tab = top === '' ? 'overview' : top;
  renderTabs(tab);
  const visible = TABS.find((t) => t.id === tab);
  if (!pages || (visible && visible.show && !visible.show(state.user))) {
    state.page = null;
    clear(main, h('h1', null, 'Not found'), h('p', null, 'There is no such page, or your user may not see it.'));
    main.dataset.ready = tab;
    return;
  }
  const rest = segs.slice(1);
  const page = top === 'admin' ? pages[0] : pages[Math.min(rest.length, pages.length - 1)];
  if (!page) {
    clear(main, h('h1', null, 'Not found'));
    main.dataset.ready = tab;
    return;
  }
  const ctx = { main: h('div', { class: 'page', 'data-page': tab }), params: rest, state, navigate, api };
  clear(main, ctx.main);
  state.page = null;
  try {
    const p = (await page(ctx)) || null;
    if (mine !== routeSeq) return; // another route has started
    state.page = p;
    if (p && p.refresh) await p.refresh();
  } catch (e) {
    if (mine !== routeSeq) return;
    if (e.status === 404) clear(ctx.main, h('h1', null, 'Not found'), h('p', null, e.reason));
    else if (e instanceof api.APIError) clear(ctx.main, h('h1', null, 'Error'), h('p', { class: 'field-error' }, e.reason));
    else { console.error(e); clear(ctx.main, h('h1', null, 'Error'), h('p', { class: 'field-error' }, String(e.message || e))); }
  }
  if (mine === routeSeq) main.dataset.ready = tab;
}

export function navigate(hash) {
  if (location.hash === hash) route(); else location.hash = hash;
}

async function start() {
  header.hidden = false;
  footer.hidden = false;
  document.title = 'Warren Management';
  document.getElementById('username').textContent = state.user.name;
  const r = sessionStorage.getItem('warren.refresh');
  if (r !== null) document.getElementById('refresh').value = r;
  await Promise.all([refreshHeader(), refreshVHosts()]);
  startTimer();
  await route();
}

async function boot() {
  api.setUnauthorizedHandler(() => {
    api.clearCredentials();
    state.user = null;
    showLogin('Login failed: the user or password is no longer valid.');
  });
  document.getElementById('logout').addEventListener('click', logout);
  document.getElementById('refresh').addEventListener('change', startTimer);
  document.getElementById('vhost').addEventListener('change', (e) => {
    state.vhost = e.target.value;
    sessionStorage.setItem('warren.vhost', state.vhost);
    route();
  });
  window.addEventListener('hashchange', route);
  if (!api.credentials()) { showLogin(); return; }
  try {
    state.user = whoamiUser(await api.get('/api/whoami'));
  } catch (e) {
    api.clearCredentials();
    showLogin(e.status === 401 ? '' : e.reason);
    return;
  }
  start();
}

window.addEventListener('unhandledrejection', (e) => {
  if (e.reason instanceof api.APIError) notify(e.reason.reason, 'error');
});

boot();
