// Admin: users, virtual hosts, permissions, policies, limits and
// definitions. Administrators see all of it; policymakers see Policies.

import { h, appendTo, clear, fmtNum, section, facts, link, args, pill, notify } from '../dom.js';
import { listView } from '../table.js';
import { form, QUEUE_ARGS } from '../forms.js';
import { deleteButton } from './common.js';
import * as api from '../api.js';

const SUBS = [
  { id: 'users', title: 'Users', admin: true },
  { id: 'vhosts', title: 'Virtual Hosts', admin: true },
  { id: 'policies', title: 'Policies', admin: false },
  { id: 'limits', title: 'Limits', admin: true },
  { id: 'definitions', title: 'Definitions', admin: true },
];

export async function route(ctx) {
  const { main, params, state } = ctx;
  const isAdmin = state.user.is('administrator');
  const subs = SUBS.filter((s) => isAdmin || !s.admin);
  const sub = params[0] || subs[0].id;
  const page = subs.find((s) => s.id === sub);
  const layout = h('div', { class: 'admin' },
    h('nav', { class: 'subnav', 'aria-label': 'Admin' }, h('ul', null, subs.map((s) =>
      h('li', null, h('a', { href: `#/admin/${s.id}`, class: s.id === sub ? 'active' : null, 'aria-current': s.id === sub ? 'page' : null }, s.title))))),
    h('div', { class: 'admin-body' }));
  appendTo(main, layout);
  const body = layout.lastChild;
  if (!page) { body.append(h('h1', null, 'Not found')); return null; }
  const sctx = { ...ctx, main: body, params: params.slice(1) };
  switch (sub) {
    case 'users': return params[1] !== undefined ? user(sctx) : users(sctx);
    case 'vhosts': return params[1] !== undefined ? vhost(sctx) : vhosts(sctx);
    case 'policies': return policies(sctx);
    case 'limits': return limits(sctx);
    case 'definitions': return definitions(sctx);
  }
  return null;
}

const TAGS = ['administrator', 'monitoring', 'policymaker', 'management', 'impersonator'];

function tagButtons(input) {
  return h('div', { class: 'known' }, h('span', { class: 'hint' }, 'Set '), TAGS.map((t) => {
    const b = h('button', { type: 'button', class: 'chip' }, t);
    b.addEventListener('click', () => {
      const cur = input.value.split(',').map((s) => s.trim()).filter(Boolean);
      if (!cur.includes(t)) cur.push(t);
      input.value = cur.join(', ');
      input.focus();
    });
    return b;
  }));
}

function tagList(tags) {
  const list = Array.isArray(tags) ? tags : String(tags || '').split(',').filter(Boolean);
  return list.length ? list.map((t) => pill(t, t === 'administrator' ? 'orange' : 'grey')) : h('span', { class: 'hint' }, 'No access');
}

async function users(ctx) {
  const { main } = ctx;
  const list = listView({ id: 'users', title: 'users', url: () => '/api/users', sort: 'name', columns: [
    { key: 'name', title: 'Name', render: (u) => h('a', { href: `#/admin/users/${encodeURIComponent(u.name)}` }, u.name) },
    { key: 'tags', title: 'Tags', render: (u) => tagList(u.tags) },
    { key: 'password_hash', title: 'Has password', sort: '', render: (u) => (u.password_hash ? '●' : '○') },
  ] });
  const add = form({
    id: 'add-user',
    fields: [
      { name: 'name', label: 'Username', required: true, keys: ['user', 'name'] },
      { name: 'password', label: 'Password', type: 'password', autocomplete: 'new-password', keys: ['password'] },
      { name: 'password2', label: 'Password (confirm)', type: 'password', autocomplete: 'new-password', keys: [] },
      { name: 'tags', label: 'Tags', placeholder: 'comma-separated', keys: ['tag'] },
    ],
    submit: 'Add user',
    async onSubmit(v) {
      if (v.password !== v.password2) { add.showError('password2', 'The passwords do not match'); return ''; }
      const body = { tags: v.tags };
      if (v.password) body.password = v.password;
      await api.put(api.path('users', v.name), body);
      add.reset();
      list.refresh();
      return `User ${v.name} added.`;
    },
  });
  add.controls.tags.after(tagButtons(add.controls.tags));
  appendTo(main, h('h1', null, 'Users'), section('All users', list.el), section('Add a user', add.el));
  return { refresh: list.refresh };
}

function permissionForms(state, { user, vhost, onDone }) {
  const perm = form({
    id: 'set-permission',
    fields: [
      user === undefined ? { name: 'user', label: 'User', required: true, keys: ['user'] } : { name: 'vhost', label: 'Virtual host', type: 'select', options: state.vhosts || ['/'] },
      { name: 'configure', label: 'Configure regexp', value: '.*', keys: ['configure'] },
      { name: 'write', label: 'Write regexp', value: '.*', keys: ['write'] },
      { name: 'read', label: 'Read regexp', value: '.*', keys: ['read'] },
    ],
    submit: 'Set permission',
    async onSubmit(v) {
      await api.put(api.path('permissions', vhost ?? v.vhost, user ?? v.user), { configure: v.configure, write: v.write, read: v.read });
      onDone();
      return 'Permission set.';
    },
  });
  const topic = form({
    id: 'set-topic-permission',
    fields: [
      user === undefined ? { name: 'user', label: 'User', required: true, keys: ['user'] } : { name: 'vhost', label: 'Virtual host', type: 'select', options: state.vhosts || ['/'] },
      { name: 'exchange', label: 'Exchange', value: 'amq.topic', keys: ['exchange'] },
      { name: 'write', label: 'Write regexp', value: '.*', keys: ['write'] },
      { name: 'read', label: 'Read regexp', value: '.*', keys: ['read'] },
    ],
    submit: 'Set topic permission',
    async onSubmit(v) {
      await api.put(api.path('topic-permissions', vhost ?? v.vhost, user ?? v.user), { exchange: v.exchange, write: v.write, read: v.read });
      onDone();
      return 'Topic permission set.';
    },
  });
  return { perm, topic };
}

function permTable(items, { byUser, onChange }) {
  if (!items.length) return h('p', { class: 'empty' }, '… no permissions …');
  return h('div', { class: 'scroll' }, h('table', { class: 'list' },
    h('thead', null, h('tr', null, [byUser ? 'Virtual host' : 'User', 'Configure regexp', 'Write regexp', 'Read regexp', ''].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', null, items.map((p) => h('tr', null,
      h('td', null, byUser ? h('a', { href: `#/admin/vhosts/${encodeURIComponent(p.vhost)}` }, p.vhost) : h('a', { href: `#/admin/users/${encodeURIComponent(p.user)}` }, p.user)),
      h('td', null, h('code', null, p.configure)), h('td', null, h('code', null, p.write)), h('td', null, h('code', null, p.read)),
      h('td', null, clearButton(api.path('permissions', p.vhost, p.user), onChange)))))));
}

function topicTable(items, { byUser, onChange }) {
  if (!items.length) return h('p', { class: 'empty' }, '… no topic permissions …');
  return h('div', { class: 'scroll' }, h('table', { class: 'list' },
    h('thead', null, h('tr', null, [byUser ? 'Virtual host' : 'User', 'Exchange', 'Write regexp', 'Read regexp', ''].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', null, items.map((p) => h('tr', null,
      h('td', null, byUser ? p.vhost : p.user), h('td', null, p.exchange),
      h('td', null, h('code', null, p.write)), h('td', null, h('code', null, p.read)),
      h('td', null, clearButton(`${api.path('topic-permissions', p.vhost, p.user)}`, onChange, { exchange: p.exchange })))))));
}

function clearButton(url, after) {
  const b = h('button', { type: 'button', class: 'secondary small' }, 'Clear');
  b.addEventListener('click', async () => {
    try { await api.del(url); notify('Cleared.'); after(); } catch (e) { notify(e.reason, 'error'); }
  });
  return b;
}

async function user(ctx) {
  const { main, params, state, navigate } = ctx;
  const name = params[0];
  const url = api.path('users', name);
  const factsEl = h('div');
  const permsEl = h('div');
  const topicEl = h('div');
  let current;
  const refreshPerms = async () => {
    const [ps, ts] = await Promise.all([api.get(`${url}/permissions`), api.get(`${url}/topic-permissions`)]);
    clear(permsEl, permTable(ps, { byUser: true, onChange: refreshPerms }));
    clear(topicEl, topicTable(ts, { byUser: true, onChange: refreshPerms }));
  };
  const { perm, topic } = permissionForms(state, { user: name, onDone: refreshPerms });
  const upd = form({
    id: 'update-user',
    fields: [
      { name: 'password', label: 'Password', type: 'password', autocomplete: 'new-password', hint: 'Leave empty to keep the current password.', keys: ['password'] },
      { name: 'password2', label: 'Password (confirm)', type: 'password', autocomplete: 'new-password', keys: [] },
      { name: 'tags', label: 'Tags', keys: ['tag'] },
    ],
    submit: 'Update user',
    async onSubmit(v) {
      if (v.password !== v.password2) { upd.showError('password2', 'The passwords do not match'); return ''; }
      const body = { tags: v.tags };
      if (v.password) body.password = v.password;
      else if (current && current.password_hash) { body.password_hash = current.password_hash; body.hashing_algorithm = current.hashing_algorithm; }
      await api.put(url, body);
      upd.controls.password.value = ''; upd.controls.password2.value = '';
      refresh();
      return `User ${name} updated.`;
    },
  });
  upd.controls.tags.after(tagButtons(upd.controls.tags));
  appendTo(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/admin/users' }, 'Users'), ' › '),
    h('h1', null, 'User ', h('span', { class: 'objname' }, name)),
    section('Overview', factsEl),
    section('Permissions', permsEl, h('h3', null, 'Set permission'), perm.el),
    section('Topic permissions', topicEl, h('h3', null, 'Set topic permission'), topic.el),
    section('Update this user', upd.el),
    section('Delete this user', h('div', { class: 'buttons' }, deleteButton('Delete user', `Delete user ${name}?`, url, () => navigate('#/admin/users')))),
  );
  let first = true;
  async function refresh() {
    current = await api.get(url);
    clear(factsEl, facts([['Tags', tagList(current.tags)], ['Can log in with password', current.password_hash ? '●' : '○'], ['Limits', args(current.limits)]]));
    if (first) {
      first = false;
      upd.controls.tags.value = (Array.isArray(current.tags) ? current.tags : [current.tags]).join(', ');
      await refreshPerms();
    }
  }
  return { refresh };
}

async function vhosts(ctx) {
  const { main } = ctx;
  const list = listView({ id: 'vhosts', title: 'virtual hosts', url: () => '/api/vhosts', sort: 'name', columns: [
    { key: 'name', title: 'Name', render: (v) => h('a', { href: `#/admin/vhosts/${encodeURIComponent(v.name)}` }, v.name) },
    { key: 'description', title: 'Description' },
    { key: 'tags', title: 'Tags', sort: '', render: (v) => (v.tags || []).map((t) => pill(t, 'grey')) },
    { key: 'default_queue_type', title: 'Default queue type', render: (v) => queueTypeName(v.default_queue_type) },
    { key: 'messages_ready', title: 'Ready', cls: 'num', desc: true },
    { key: 'messages_unacknowledged', title: 'Unacked', cls: 'num', desc: true },
    { key: 'messages', title: 'Total', cls: 'num', desc: true },
  ] });
  const add = form({
    id: 'add-vhost',
    fields: [
      { name: 'name', label: 'Name', required: true, keys: ['name', 'vhost'] },
      { name: 'description', label: 'Description', keys: ['description'] },
      { name: 'tags', label: 'Tags', placeholder: 'comma-separated', keys: ['tags'] },
      { name: 'default_queue_type', label: 'Default queue type', type: 'select', options: [['classic', 'Classic'], ['quorum', 'Quorum']], keys: ['default_queue_type'] },
    ],
    submit: 'Add virtual host',
    async onSubmit(v) {
      await api.put(api.path('vhosts', v.name), { description: v.description, tags: v.tags, default_queue_type: v.default_queue_type });
      add.reset();
      list.refresh();
      return `Virtual host ${v.name} added.`;
    },
  });
  appendTo(main, h('h1', null, 'Virtual Hosts'), section('All virtual hosts', list.el), section('Add a new virtual host', add.el));
  return { refresh: list.refresh };
}

async function vhost(ctx) {
  const { main, params, state, navigate } = ctx;
  const name = params[0];
  const url = api.path('vhosts', name);
  const factsEl = h('div');
  const permsEl = h('div');
  const topicEl = h('div');
  const limitsEl = h('div');
  const refreshPerms = async () => {
    const [ps, ts] = await Promise.all([api.get(`${url}/permissions`), api.get(`${url}/topic-permissions`)]);
    clear(permsEl, permTable(ps, { byUser: false, onChange: refreshPerms }));
    clear(topicEl, topicTable(ts, { byUser: false, onChange: refreshPerms }));
  };
  const refreshLimits = async () => {
    const ls = await api.get(api.path('vhost-limits', name));
    clear(limitsEl, limitTable(ls, refreshLimits));
  };
  const { perm, topic } = permissionForms(state, { vhost: name, onDone: refreshPerms });
  appendTo(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/admin/vhosts' }, 'Virtual Hosts'), ' › '),
    h('h1', null, 'Virtual Host ', h('span', { class: 'objname' }, name)),
    section('Overview', factsEl),
    section('Permissions', permsEl, h('h3', null, 'Set permission'), perm.el),
    section('Topic permissions', topicEl, h('h3', null, 'Set topic permission'), topic.el),
    section('Limits', limitsEl, h('h3', null, 'Set limit'), limitForm(name, refreshLimits).el),
    section('Delete this virtual host', h('div', { class: 'buttons' }, deleteButton('Delete virtual host', `Delete virtual host ${name} and everything in it?`, url, () => navigate('#/admin/vhosts')))),
  );
  let first = true;
  async function refresh() {
    const v = await api.get(url);
    clear(factsEl, facts([['Description', v.description], ['Tags', (v.tags || []).map((t) => pill(t, 'grey'))], ['Default queue type', queueTypeName(v.default_queue_type)],
      ['Messages', `${fmtNum(v.messages)} (${fmtNum(v.messages_ready)} ready, ${fmtNum(v.messages_unacknowledged)} unacked)`]]));
    if (first) { first = false; await Promise.all([refreshPerms(), refreshLimits()]); }
  }
  return { refresh };
}

// queueTypeName shows a vhost's default queue type; RabbitMQ says
// "undefined" for a vhost that has none (its queues are classic).
function queueTypeName(t) {
  return !t || t === 'undefined' ? 'classic (not set)' : t;
}

function limitTable(ls, onChange) {
  const rows = [];
  for (const l of ls) for (const [k, v] of Object.entries(l.value || {})) rows.push({ vhost: l.vhost, k, v });
  if (!rows.length) return h('p', { class: 'empty' }, '… no limits …');
  return h('div', { class: 'scroll' }, h('table', { class: 'list' },
    h('thead', null, h('tr', null, ['Virtual host', 'Limit', 'Value', ''].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', null, rows.map((r) => h('tr', null, h('td', null, r.vhost), h('td', null, r.k), h('td', { class: 'num' }, fmtNum(r.v)),
      h('td', null, clearButton(api.path('vhost-limits', r.vhost, r.k), onChange)))))));
}

function limitForm(vhostName, onDone, state) {
  const fields = [];
  if (vhostName === undefined) fields.push({ name: 'vhost', label: 'Virtual host', type: 'select', options: (state && state.vhosts) || ['/'] });
  fields.push({ name: 'limit', label: 'Limit', type: 'select', options: [['max-connections', 'max-connections'], ['max-queues', 'max-queues']] },
    { name: 'value', label: 'Value', required: true, keys: ['value'], hint: 'A negative value means no limit.' });
  const f = form({
    id: 'set-limit',
    fields,
    submit: 'Set limit',
    async onSubmit(v) {
      await api.put(api.path('vhost-limits', vhostName ?? v.vhost, v.limit), { value: Number(v.value) });
      onDone();
      return 'Limit set.';
    },
  });
  return f;
}

async function limits(ctx) {
  const { main, state } = ctx;
  const el = h('div');
  const refresh = async () => clear(el, limitTable(await api.get('/api/vhost-limits'), refresh));
  appendTo(main, h('h1', null, 'Limits'), section('Virtual host limits', el, h('h3', null, 'Set / update a virtual host limit'), limitForm(undefined, refresh, state).el));
  return { refresh };
}

async function policies(ctx) {
  const { main, state } = ctx;
  const list = listView({ id: 'policies', title: 'policies', url: () => (state.vhost ? api.path('policies', state.vhost) : '/api/policies'), sort: 'name', columns: [
    { key: 'vhost', title: 'Virtual host' },
    { key: 'name', title: 'Name' },
    { key: 'pattern', title: 'Pattern', render: (p) => h('code', null, p.pattern) },
    { key: 'apply-to', title: 'Apply to' },
    { key: 'definition', title: 'Definition', sort: '', render: (p) => args(p.definition) },
    { key: 'priority', title: 'Priority', cls: 'num' },
    { key: 'del', title: '', sort: '', render: (p) => {
      const b = deleteButton('Delete', `Delete policy ${p.name}?`, api.path('policies', p.vhost, p.name), () => list.refresh());
      b.classList.add('small');
      return b;
    } },
  ] });
  const add = form({
    id: 'add-policy',
    fields: [
      { name: 'vhost', label: 'Virtual host', type: 'select', options: state.vhosts || ['/'], value: state.vhost || undefined },
      { name: 'name', label: 'Name', required: true, keys: ['name'] },
      { name: 'pattern', label: 'Pattern', required: true, placeholder: '^amq\\.', keys: ['pattern'] },
      { name: 'apply_to', label: 'Apply to', type: 'select', options: [['all', 'Exchanges and queues'], ['exchanges', 'Exchanges'], ['queues', 'Queues']], keys: ['apply-to'] },
      { name: 'priority', label: 'Priority', value: '0', keys: ['priority'] },
      { name: 'definition', label: 'Definition', type: 'args', keys: ['definition', 'message-ttl', 'max-length', 'expires', 'dead-letter', 'overflow', 'alternate-exchange'],
        known: QUEUE_ARGS.filter(([k]) => k.startsWith('x-') && k !== 'x-max-priority' && k !== 'x-single-active-consumer').map(([k, t, d]) => [k.slice(2), t, d]) },
    ],
    submit: 'Add / update policy',
    async onSubmit(v) {
      await api.put(api.path('policies', v.vhost, v.name), { pattern: v.pattern, 'apply-to': v.apply_to, priority: Number(v.priority), definition: v.definition });
      add.reset();
      list.refresh();
      return `Policy ${v.name} set.`;
    },
  });
  appendTo(main, h('h1', null, 'Policies'), section('User policies', list.el), section('Add / update a policy', add.el));
  return { refresh: list.refresh };
}

async function definitions(ctx) {
  const { main, state } = ctx;
  const status = h('div', { class: 'hint', role: 'status' });
  const exp = form({
    id: 'export-definitions',
    fields: [{ name: 'vhost', label: 'Virtual host', type: 'select', options: [['', 'All']].concat((state.vhosts || []).map((v) => [v, v])) },
      { name: 'filename', label: 'File name', value: `warren-definitions-${new Date().toISOString().slice(0, 10)}.json`, keys: [] }],
    submit: 'Download broker definitions',
    async onSubmit(v) {
      const defs = await api.get(v.vhost ? api.path('definitions', v.vhost) : '/api/definitions');
      const blob = new Blob([JSON.stringify(defs, null, 2)], { type: 'application/json' });
      const a = h('a', { href: URL.createObjectURL(blob), download: v.filename || 'definitions.json' });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 10000);
      status.textContent = `Exported ${(defs.queues || []).length} queues, ${(defs.exchanges || []).length} exchanges, ${(defs.users || []).length} users.`;
      return 'Definitions downloaded.';
    },
  });
  const imp = form({
    id: 'import-definitions',
    fields: [{ name: 'file', label: 'Definitions file', type: 'file', accept: '.json,application/json', keys: ['json', 'definitions'] },
      { name: 'vhost', label: 'Virtual host', type: 'select', options: [['', 'All']].concat((state.vhosts || []).map((v) => [v, v])) }],
    submit: 'Upload broker definitions',
    async onSubmit(v) {
      if (!v.file) { imp.showError('file', 'Choose a file to upload'); return ''; }
      const text = await v.file.text();
      try { JSON.parse(text); } catch (e) { imp.showError('file', `Not JSON: ${e.message}`); return ''; }
      await api.post(v.vhost ? api.path('definitions', v.vhost) : '/api/definitions', text);
      return 'Definitions imported.';
    },
  });
  appendTo(main, h('h1', null, 'Definitions'),
    section('Export definitions', h('p', { class: 'hint' }, 'Users, virtual hosts, permissions, topic permissions, policies, queues, exchanges and bindings, as RabbitMQ exports them.'), exp.el, status),
    section('Import definitions', h('p', { class: 'hint' }, 'Objects in the file are created or updated; nothing is deleted.'), imp.el));
  return null;
}
