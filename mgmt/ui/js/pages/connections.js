// Connections: the list, and a connection's page with its client
// properties, channels and a close form.

import { h, appendTo, clear, fmtNum, fmtBytes, section, facts, link, args, pill, fmtValue } from '../dom.js';
import { listView } from '../table.js';
import { form } from '../forms.js';

// byteRate is a {name}_details rate in bytes per second.
function byteRate(d) {
  return `${fmtBytes(Math.round((d && d.rate) || 0))}/s`;
}

function client(c) {
  const p = c.client_properties || {};
  return [p.product, p.version].filter(Boolean).join(' ') || '';
}

export async function connections(ctx) {
  const { main, state, api } = ctx;
  const cols = [
    state.vhost ? null : { key: 'vhost', title: 'Virtual host' },
    { key: 'name', title: 'Name', render: (c) => h('a', { href: link('connections', c.name) }, c.name, (c.client_properties || {}).connection_name ? h('span', { class: 'sub' }, c.client_properties.connection_name) : null) },
    { key: 'user', title: 'User name' },
    { key: 'state', title: 'State', render: (c) => pill(c.state, c.state === 'running' ? 'green' : 'grey') },
    { key: 'ssl', title: 'TLS', render: (c) => (c.ssl ? pill(c.ssl_protocol || 'TLS', 'blue') : '○') },
    { key: 'protocol', title: 'Protocol' },
    { key: 'client', title: 'Client', sort: 'client_properties.product', render: client },
    { key: 'channels', title: 'Channels', cls: 'num', desc: true },
    { key: 'timeout', title: 'Heartbeat', cls: 'num', render: (c) => `${c.timeout}s` },
    { key: 'recv_oct_rate', sort: 'recv_oct_details.rate', title: 'From client', cls: 'num', desc: true, render: (c) => byteRate(c.recv_oct_details) },
    { key: 'send_oct_rate', sort: 'send_oct_details.rate', title: 'To client', cls: 'num', desc: true, render: (c) => byteRate(c.send_oct_details) },
  ].filter(Boolean);
  const url = () => (state.vhost ? api.path('vhosts', state.vhost, 'connections') : '/api/connections');
  const list = listView({ id: 'connections', title: 'connections', url, columns: cols, sort: 'name' });
  appendTo(main, h('h1', null, 'Connections'), section('All connections', list.el));
  return { refresh: list.refresh };
}

export async function connection(ctx) {
  const { main, params, api, navigate, state } = ctx;
  const [name] = params;
  const url = api.path('connections', name);
  const factsEl = h('div');
  const propsEl = h('div');
  const chansEl = h('div');
  const close = form({
    id: 'close-connection',
    fields: [{ name: 'reason', label: 'Reason', value: 'Closed via management plugin', keys: ['reason'] }],
    submit: 'Force Close',
    async onSubmit(v) {
      await api.del(url, undefined, { headers: { 'X-Reason': v.reason } });
      navigate('#/connections');
      return `Connection ${name} closed.`;
    },
  });
  close.el.querySelector('button[type=submit]').classList.add('danger');
  appendTo(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/connections' }, 'Connections'), ' › '),
    h('h1', null, 'Connection ', h('span', { class: 'objname' }, name)),
    section('Overview', factsEl),
    section('Channels', chansEl),
    section('Client properties', propsEl),
    section('Close this connection', close.el),
  );
  async function refresh() {
    const [c, chans] = await Promise.all([api.get(url), api.get(`${url}/channels`)]);
    const tls = c.ssl
      ? facts([['Protocol', c.ssl_protocol || 'TLS'], ['Cipher', c.ssl_cipher || ''], ['Peer certificate', c.peer_cert_subject || 'none']])
      : 'Not used';
    clear(factsEl, h('div', { class: 'cols' },
      facts([['Virtual host', c.vhost], ['Username', c.user], ['State', pill(c.state, 'green')], ['Protocol', c.protocol],
        ['Connected from', `${c.peer_host}:${c.peer_port}`], ['Connected to', `${c.host}:${c.port}`], ['TLS', tls]]),
      facts([['Heartbeat', `${c.timeout}s`], ['Frame max', `${fmtNum(c.frame_max)} bytes`], ['Channel limit', fmtNum(c.channel_max)],
        ['Channels', fmtNum(c.channels)], ['Node', c.node], ['Connection name', (c.client_properties || {}).connection_name || '']]),
      facts([
        ['From client', h('span', { 'data-field': 'recv_rate' }, byteRate(c.recv_oct_details))],
        ['To client', h('span', { 'data-field': 'send_rate' }, byteRate(c.send_oct_details))],
        ['Received', h('span', { 'data-field': 'recv_oct', title: `${fmtNum(c.recv_oct)} bytes in ${fmtNum(c.recv_cnt)} reads` }, fmtBytes(c.recv_oct))],
        ['Sent', h('span', { 'data-field': 'send_oct', title: `${fmtNum(c.send_oct)} bytes in ${fmtNum(c.send_cnt)} writes` }, fmtBytes(c.send_oct))],
        ['Pending send', fmtBytes(c.send_pend)],
      ])));
    clear(propsEl, clientProps(c.client_properties || {}));
    clear(chansEl, chans.length === 0 ? h('p', { class: 'empty' }, '… no channels …') : h('div', { class: 'scroll' }, h('table', { class: 'list' },
      h('thead', null, h('tr', null, ['Channel', 'Mode', 'State', 'Prefetch', 'Unacked', 'Consumers'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', null, chans.map((ch) => h('tr', null,
        h('td', null, h('a', { href: link('channels', ch.name) }, ch.name)), h('td', null, mode(ch)),
        h('td', null, pill(ch.state, 'green')), h('td', { class: 'num' }, prefetch(ch)),
        h('td', { class: 'num' }, fmtNum(ch.messages_unacknowledged)), h('td', { class: 'num' }, fmtNum(ch.consumer_count))))))));
  }
  return { refresh };
}

export function mode(ch) {
  const out = [];
  if (ch.confirm) out.push(pill('C', 'blue'));
  if (ch.transactional) out.push(pill('T', 'purple'));
  return out.length ? out : '';
}

export function prefetch(ch) {
  const parts = [];
  if (ch.prefetch_count) parts.push(`${ch.prefetch_count}`);
  if (ch.global_prefetch_count) parts.push(`${ch.global_prefetch_count} (global)`);
  return parts.join(' / ') || '0';
}

function clientProps(p) {
  const rows = Object.keys(p).sort().map((k) => {
    const v = p[k];
    if (k === 'capabilities' && v && typeof v === 'object') {
      return [k, h('span', { class: 'args' }, Object.keys(v).sort().map((c) => h('span', { class: 'arg' }, h('b', null, c), ': ', fmtValue(v[c]))))];
    }
    return [k, typeof v === 'object' ? args(v) : fmtValue(v)];
  });
  return rows.length ? facts(rows) : h('p', { class: 'empty' }, 'None');
}
