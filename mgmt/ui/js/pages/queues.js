// Queues: the paged list with an add form, and a queue's page.

import { h, appendTo, clear, fmtNum, fmtRate, fmtBytes, rateOf, section, facts, link, args, pill, notify, fmtValue, confirmAction } from '../dom.js';
import { listView } from '../table.js';
import { form, QUEUE_ARGS, parseHeaders } from '../forms.js';
import { record, renderInto, rangeSelect, rangeTitle, rangeQuery } from '../chart.js';
import { listURL, vhostField, features, bindingTable, bindForm, deleteButton } from './common.js';
import { QUEUED_SERIES, rateAxis, queuedHistory, rateHistory, withNow } from './overview.js';

export async function queues(ctx) {
  const { main, state, api, navigate } = ctx;
  const cols = [
    state.vhost ? null : { key: 'vhost', title: 'Virtual host' },
    { key: 'name', title: 'Name', render: (q) => h('a', { href: link('queues', q.vhost, q.name) }, q.name) },
    { key: 'type', title: 'Type', render: queueType },
    { key: 'features', title: 'Features', sort: '', render: features },
    { key: 'state', title: 'State', render: (q) => pill(q.state, q.state === 'running' ? 'green' : 'grey') },
    { key: 'messages_ready', title: 'Ready', cls: 'num', desc: true },
    { key: 'messages_unacknowledged', title: 'Unacked', cls: 'num', desc: true },
    { key: 'messages', title: 'Total', cls: 'num', desc: true },
    { key: 'consumers', title: 'Consumers', cls: 'num', desc: true },
    { key: 'incoming', title: 'incoming', cls: 'num', sort: 'message_stats.publish_details.rate', desc: true, render: (q) => fmtRate(rateOf(q.message_stats, 'publish')) },
    { key: 'deliver_get', title: 'deliver / get', cls: 'num', sort: 'message_stats.deliver_get_details.rate', desc: true, render: (q) => fmtRate(rateOf(q.message_stats, 'deliver_get')) },
    { key: 'ack', title: 'ack', cls: 'num', sort: 'message_stats.ack_details.rate', desc: true, render: (q) => fmtRate(rateOf(q.message_stats, 'ack')) },
  ].filter(Boolean);
  const list = listView({ id: 'queues', title: 'queues', url: () => listURL('queues', state), columns: cols, sort: 'name', pageSize: 100 });
  const add = form({
    id: 'add-queue',
    fields: [
      vhostField(state),
      { name: 'type', label: 'Type', type: 'select', options: [['classic', 'Classic'], ['quorum', 'Quorum']] },
      { name: 'name', label: 'Name', required: true, keys: ['name', 'queue name'] },
      { name: 'durable', label: 'Durability', type: 'select', options: [['true', 'Durable'], ['false', 'Transient']], keys: ['durable', 'non-durable'] },
      { name: 'auto_delete', label: 'Auto delete', type: 'select', options: [['false', 'No'], ['true', 'Yes']], keys: ['auto-delete', 'auto_delete'] },
      { name: 'arguments', label: 'Arguments', type: 'args', known: QUEUE_ARGS, keys: ['arg', 'x-'] },
    ],
    submit: 'Add queue',
    async onSubmit(v) {
      const a = { ...v.arguments };
      if (v.type !== 'classic') a['x-queue-type'] = v.type;
      await api.put(api.path('queues', v.vhost, v.name), { durable: v.durable === 'true', auto_delete: v.auto_delete === 'true', arguments: a });
      add.reset();
      list.refresh();
      return `Queue ${v.name} added.`;
    },
  });
  appendTo(main, h('h1', null, 'Queues'), section('All queues', list.el), section('Add a new queue', add.el));
  return { refresh: list.refresh };
}

export async function queue(ctx) {
  const { main, params, api, navigate } = ctx;
  const [vhost, name] = params;
  const url = api.path('queues', vhost, name);
  const key = `queue.${vhost}.${name}`;
  const factsEl = h('div');
  const chartsEl = h('div', { class: 'charts' });
  const consumersEl = h('div');
  const bindingsEl = h('div');
  // A stream's partitions and consumer groups, shown once the queue turns
  // out to be one.
  const partitionsEl = h('div', { id: 'stream-partitions' });
  const groupsEl = h('div', { id: 'stream-groups' });
  const streamSections = [section('Partitions', partitionsEl), section('Consumer groups', groupsEl)];
  for (const s of streamSections) s.hidden = true;
  const groupActions = streamGroupActions(api, vhost, name, () => refresh());
  const getResult = h('div', { class: 'messages', 'aria-live': 'polite' });

  const refreshBindings = async () => {
    const bs = await api.get(api.path('queues', vhost, name, 'bindings'));
    clear(bindingsEl, bindingTable(bs, { showDest: false, onChange: refreshBindings }));
  };

  const getForm = form({
    id: 'get-messages',
    fields: [
      { name: 'ackmode', label: 'Ack mode', type: 'select', options: [
        ['reject_requeue_true', 'Nack message requeue true'],
        ['ack_requeue_false', 'Automatic ack'],
        ['reject_requeue_false', 'Reject requeue false'],
        ['ack_requeue_true', 'Ack message requeue true'],
      ], keys: ['ackmode'] },
      { name: 'encoding', label: 'Encoding', type: 'select', options: [['auto', 'Auto string / base64'], ['base64', 'base64']], keys: ['encoding'] },
      { name: 'count', label: 'Messages', value: '1', keys: ['count'] },
    ],
    submit: 'Get messages',
    async onSubmit(v) {
      const msgs = await api.post(`${url}/get`, { count: Number(v.count), ackmode: v.ackmode, encoding: v.encoding, truncate: 50000 });
      clear(getResult, msgs.length === 0 ? h('p', { class: 'empty' }, 'Queue is empty') : msgs.map((m, i) => message(m, i + 1)));
      refresh();
      return '';
    },
  });

  const pubForm = form({
    id: 'publish-to-queue',
    fields: [
      { name: 'delivery_mode', label: 'Delivery mode', type: 'select', options: [['1', '1 - Non-persistent'], ['2', '2 - Persistent']] },
      { name: 'headers', label: 'Headers', type: 'textarea', rows: 2, placeholder: 'key = value, one a line', keys: ['headers'] },
      { name: 'properties', label: 'Properties', type: 'textarea', rows: 2, placeholder: 'content_type = text/plain', keys: ['propert', 'content_type', 'expiration', 'priority'] },
      { name: 'payload', label: 'Payload', type: 'textarea', rows: 4, keys: ['payload'] },
    ],
    submit: 'Publish message',
    async onSubmit(v) {
      const props = parseHeaders('properties', v.properties);
      props.delivery_mode = Number(v.delivery_mode);
      props.headers = parseHeaders('headers', v.headers);
      const r = await api.post(api.path('exchanges', vhost, 'amq.default', 'publish'), { routing_key: name, properties: props, payload: v.payload, payload_encoding: 'string' });
      refresh();
      return r.routed ? 'Message published.' : 'Message published, but not routed.';
    },
  });

  const purge = h('button', { type: 'button', class: 'danger' }, 'Purge messages');
  purge.addEventListener('click', async () => {
    try { await api.del(`${url}/contents`); notify(`Queue ${name} purged.`); refresh(); } catch (e) { notify(e.reason, 'error'); }
  });

  appendTo(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/queues' }, 'Queues'), ' › ', vhost, ' › '),
    h('h1', null, 'Queue ', h('span', { class: 'objname' }, name)),
    section('Overview', rangeSelect(() => refresh()), chartsEl, factsEl),
    section('Consumers', consumersEl),
    ...streamSections,
    section('Bindings', bindingsEl, h('h3', null, 'Add binding to this queue'), bindForm({ vhost, dest: name, destType: 'queue', onDone: refreshBindings })),
    section('Publish message', h('p', { class: 'hint' }, 'Published to the default exchange with this queue\'s name as the routing key.'), pubForm.el),
    section('Get messages', h('p', { class: 'hint warn' }, 'Getting messages from a queue is a destructive action: with "Nack message requeue true" they go back to the queue, redelivered.'), getForm.el, getResult),
    section('Move messages', h('p', { class: 'hint' }, 'Shovels are not part of Warren.')),
    section('Delete', h('div', { class: 'buttons' },
      deleteButton('Delete queue', `Delete queue ${name}? Its messages are lost.`, url, () => navigate('#/queues')))),
    section('Purge', h('div', { class: 'buttons' }, purge)),
  );

  async function refresh() {
    const q = await api.get(`${url}?${rangeQuery()}`);
    const ms = q.message_stats;
    clear(factsEl, h('div', { class: 'cols' },
      facts([
        ['Type', queueType(q)], ['Features', features(q)], ['State', pill(q.state, 'green')],
        ['Consumers', fmtNum(q.consumers)], ['Exclusive owner', q.owner_pid_details ? h('a', { href: link('connections', q.owner_pid_details.name) }, q.owner_pid_details.name) : 'None'],
        ['Policy', q.policy || ''], ['Arguments', args(q.arguments)],
      ]),
      facts(q.type === 'stream' ? [
        ['Messages', h('span', { 'data-field': 'messages' }, fmtNum(q.messages))], ['Unacked', fmtNum(q.messages_unacknowledged)],
        ['Partitions', fmtNum((q.partitions || []).length)], ['Committed offset', q.committed_offset === undefined ? '—' : fmtNum(q.committed_offset)],
        ['Bytes', fmtBytes((q.partitions || []).reduce((n, p) => n + p.bytes, 0))], ['Leader', q.leader],
      ] : [
        ['Ready', fmtNum(q.messages_ready)], ['Unacked', fmtNum(q.messages_unacknowledged)], ['Total', h('span', { 'data-field': 'messages' }, fmtNum(q.messages))],
        ['Ready bytes', fmtBytes(q.message_bytes_ready)], ['Paged out', `${fmtNum(q.messages_paged_out)} (${fmtBytes(q.message_bytes_paged_out)})`],
        ['Memory', fmtBytes(q.memory)], ['Node', q.node],
      ])));
    if (q.type === 'stream') {
      for (const s of streamSections) s.hidden = false;
      clear(partitionsEl, streamPartitions(q.partitions || []));
      clear(groupsEl, streamGroups(q.groups || [], groupActions));
    }
    // The broker's samples (ten minutes of them), or, should it have none,
    // the page's own.
    const queuedNow = { ready: q.messages_ready, unacked: q.messages_unacknowledged, total: q.messages };
    const ratesNow = {
      publish: rateOf(ms, 'publish'), deliver: rateOf(ms, 'deliver') + rateOf(ms, 'deliver_no_ack'),
      get: rateOf(ms, 'get') + rateOf(ms, 'get_no_ack'), ack: rateOf(ms, 'ack'), redeliver: rateOf(ms, 'redeliver'),
    };
    let qh = withNow(queuedHistory(q), queuedNow);
    let rh = withNow(rateHistory(ms, { publish: ['publish'], deliver: ['deliver', 'deliver_no_ack'], get: ['get', 'get_no_ack'], ack: ['ack'], redeliver: ['redeliver'] }), ratesNow);
    const local = !qh || !rh;
    if (!qh) qh = record(`${key}.queued`, queuedNow);
    if (!rh) rh = record(`${key}.rates`, ratesNow);
    if (!chartsEl.children.length) chartsEl.append(h('div'), h('div'));
    renderInto(chartsEl.children[0], { title: `Queued messages (${rangeTitle()})`, series: QUEUED_SERIES, hist: qh, local });
    renderInto(chartsEl.children[1], { title: `Message rates (${rangeTitle()})`, hist: rh, fmt: fmtRate, axis: rateAxis, local, series: [
        { name: 'publish', label: 'Publish', color: 'a' }, { name: 'deliver', label: 'Deliver', color: 'c' },
        { name: 'get', label: 'Get', color: 'g' }, { name: 'ack', label: 'Consumer ack', color: 'e' },
        { name: 'redeliver', label: 'Redelivered', color: 'f' }] });
    const cons = q.consumer_details || [];
    clear(consumersEl, cons.length === 0 ? h('p', { class: 'empty' }, '… no consumers …') : h('div', { class: 'scroll' }, h('table', { class: 'list' },
      h('thead', null, h('tr', null, ['Channel', 'Consumer tag', 'Ack required', 'Exclusive', 'Prefetch count', 'Active', 'Arguments'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', null, cons.map((c) => h('tr', null,
        h('td', null, h('a', { href: link('channels', c.channel_details.name) }, c.channel_details.name)),
        h('td', null, c.consumer_tag), h('td', null, c.ack_required ? '●' : '○'), h('td', null, c.exclusive ? '●' : '○'),
        h('td', { class: 'num' }, c.prefetch_count), h('td', null, c.active ? '●' : '○'), h('td', null, args(c.arguments))))))));
    if (!bindingsEl.dataset.loaded) { bindingsEl.dataset.loaded = '1'; await refreshBindings(); }
  }
  return { refresh };
}

// listTable is a table of class list with headers cols (a header is
// numeric when it starts with '#') and rows of cells.
function listTable(cols, rows) {
  return h('div', { class: 'scroll' }, h('table', { class: 'list' },
    h('thead', null, h('tr', null, cols.map((c) => h('th', { scope: 'col', class: c.startsWith('#') ? 'num' : null }, c.replace(/^#/, ''))))),
    h('tbody', null, rows.map((r) => h('tr', null, r.map((v, i) => h('td', { class: cols[i].startsWith('#') ? 'num' : null }, v)))))));
}

// streamPartitions is a stream's partitions: offsets, messages, segments
// and bytes of each.
function streamPartitions(ps) {
  return listTable(['#Partition', '#First offset', '#Next offset', '#Messages', '#Segments', '#Bytes'],
    ps.map((p) => [fmtNum(p.partition), fmtNum(p.first_offset), fmtNum(p.next_offset), fmtNum(p.messages), fmtNum(p.segments), fmtBytes(p.bytes)]));
}

// streamGroups is a stream's consumer groups: one row per group and
// partition (the group's members, total lag and actions on its first row),
// each partition's owner linked to its channel.
function streamGroups(gs, actions) {
  if (gs.length === 0) return h('p', { class: 'empty' }, '… no consumer groups …');
  const rows = [];
  for (const g of gs) {
    const chan = new Map(g.members.map((m) => [m.consumer_tag, m.channel_details]));
    const members = g.members.length === 0 ? h('span', { class: 'hint' }, 'none')
      : h('span', null, g.members.map((m) => h('div', null, h('a', { href: link('channels', m.channel_details.name), title: m.channel_details.name }, m.consumer_tag),
        m.partitions.length ? ` (${m.partitions.join(', ')})` : ' (standby)')));
    g.partitions.forEach((p, i) => {
      const cd = p.owner === null ? null : chan.get(p.owner);
      rows.push([
        i === 0 ? h('b', { 'data-group': g.name }, g.name) : '', i === 0 ? members : '', i === 0 ? fmtNum(g.lag) : '',
        fmtNum(p.partition), p.owner === null ? '—' : cd ? h('a', { href: link('channels', cd.name) }, p.owner) : p.owner,
        p.committed ? fmtNum(p.committed_offset) : h('span', { class: 'hint', title: 'never committed: where the group would start' }, `(${fmtNum(p.committed_offset)})`),
        fmtNum(p.lag), i === 0 ? actions(g) : '',
      ]);
    });
  }
  actions.forget(gs);
  return listTable(['Group', 'Members (partitions)', '#Lag', '#Partition', 'Owner', '#Committed offset', '#Partition lag', 'Actions'], rows);
}

// RESET_TO are the offsets a group's reset offers, as the API takes them.
// [value, label, what the confirmation calls it]
const RESET_TO = [
  ['first', 'Earliest', 'the first retained message'], ['next', 'Latest', 'the end (what is there is skipped)'],
  ['last', 'Last chunk', 'the last chunk written'], ['offset', 'Offset…'], ['timestamp', 'Timestamp…'],
];

// streamGroupActions returns, per group, the controls that reset its
// offsets and delete it (both ask first; the broker does either only while
// the group has no members, so they are disabled while it has). A group's
// controls are made once and kept across the page's refreshes, so that
// what is typed in them stays.
function streamGroupActions(api, vhost, stream, refresh) {
  const made = new Map();
  const make = (group) => {
    const url = api.path('stream-groups', vhost, stream, group);
    const to = h('select', { 'aria-label': `Reset ${group} to`, 'data-reset-to': group }, RESET_TO.map(([v, t]) => h('option', { value: v }, t)));
    const at = h('input', { type: 'text', 'aria-label': `Reset ${group} to offset or time`, 'data-reset-at': group, hidden: true });
    to.addEventListener('change', () => {
      at.hidden = to.value !== 'offset' && to.value !== 'timestamp';
      at.placeholder = to.value === 'offset' ? '0' : new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    });
    const reset = h('button', { type: 'button', class: 'danger', 'data-reset': group }, 'Reset offsets');
    reset.addEventListener('click', async () => {
      let offset = to.value, what = RESET_TO.find(([v]) => v === to.value)[2];
      if (offset === 'offset') {
        if (!/^\d+$/.test(at.value.trim())) { notify('An offset is a whole number, 0 or more.', 'error'); at.focus(); return; }
        offset = Number(at.value.trim());
        what = `offset ${fmtNum(offset)}`;
      } else if (offset === 'timestamp') {
        const t = new Date(at.value.trim());
        if (!at.value.trim() || isNaN(t)) { notify('A timestamp is a date and time, such as 2026-12-02T10:00:00Z.', 'error'); at.focus(); return; }
        offset = t.toISOString();
        what = `the first message at or after ${offset}`;
      }
      if (!(await confirmAction(`Reset the committed offsets of group ${group} on stream ${stream} to ${what}? The group resumes there, in every partition.`, 'Reset offsets'))) return;
      try {
        await api.post(`${url}/reset`, { offset });
        notify(`Group ${group} reset.`);
        refresh();
      } catch (e) { notify(e.reason, 'error'); }
    });
    const del = h('button', { type: 'button', class: 'danger', 'data-delete-group': group }, 'Delete group');
    del.addEventListener('click', async () => {
      if (!(await confirmAction(`Delete group ${group} of stream ${stream}? Its committed offsets are forgotten: a group of that name starts again where x-stream-offset says.`, 'Delete group'))) return;
      try {
        await api.del(url);
        notify(`Group ${group} deleted.`);
        refresh();
      } catch (e) { notify(e.reason, 'error'); }
    });
    const el = h('div', { class: 'buttons group-actions' }, to, at, reset, del);
    return { el, reset, del, to, at };
  };
  const actions = (g) => {
    let c = made.get(g.name);
    if (!c) made.set(g.name, c = make(g.name));
    const busy = g.members.length > 0;
    const why = busy ? 'Only a group without members can be reset or deleted: stop its consumers first.' : null;
    for (const x of [c.reset, c.del, c.to, c.at]) { x.disabled = busy; if (why) x.title = why; else x.removeAttribute('title'); }
    return c.el;
  };
  // forget drops the controls of groups that are gone.
  actions.forget = (gs) => {
    const names = new Set(gs.map((g) => g.name));
    for (const n of made.keys()) if (!names.has(n)) made.delete(n);
  };
  return actions;
}

// queueType is the type the queue was declared with, marked when Warren
// runs it as another type (the API says which in "type").
function queueType(q) {
  const t = (q.arguments || {})['x-queue-type'];
  return t && t !== q.type ? h('span', { title: `Declared ${t}; Warren runs it as a ${q.type} queue` }, t) : q.type;
}

function message(m, n) {
  const p = m.properties || {};
  const props = Object.entries(p).filter(([k]) => k !== 'headers');
  return h('div', { class: 'message', 'data-message': n },
    h('h3', null, `Message ${n}`),
    h('p', { class: 'hint' }, `The server reported ${fmtNum(m.message_count)} messages remaining.`),
    facts([
      ['Exchange', m.exchange === '' ? '(AMQP default)' : m.exchange],
      ['Routing key', m.routing_key],
      ['Redelivered', m.redelivered ? '●' : '○'],
      ['Properties', props.length ? h('span', { class: 'args' }, props.map(([k, v]) => h('span', { class: 'arg' }, h('b', null, k), ': ', fmtValue(v)))) : ''],
      ['Headers', args(p.headers)],
      ['Payload', h('span', null, `${fmtNum(m.payload_bytes)} bytes`, h('br'), 'Encoding: ', m.payload_encoding)],
    ]),
    h('pre', { class: 'payload' }, m.payload));
}
