// Channels: the list, and a channel's page (from the connection's channel
// list: the API has no single-channel endpoint).

import { h, appendTo, clear, fmtNum, section, facts, link, pill, args } from '../dom.js';
import { listView } from '../table.js';
import { mode, prefetch } from './connections.js';

export async function channels(ctx) {
  const { main, state, api } = ctx;
  const cols = [
    state.vhost ? null : { key: 'vhost', title: 'Virtual host' },
    { key: 'name', title: 'Channel', render: (c) => h('a', { href: link('channels', c.name) }, c.name) },
    { key: 'user', title: 'User name' },
    { key: 'mode', title: 'Mode', sort: '', render: mode },
    { key: 'state', title: 'State', render: (c) => pill(c.state, 'green') },
    { key: 'prefetch_count', title: 'Prefetch', cls: 'num', render: prefetch },
    { key: 'messages_unacknowledged', title: 'Unacked', cls: 'num', desc: true },
    { key: 'consumer_count', title: 'Consumers', cls: 'num', desc: true },
  ].filter(Boolean);
  const url = () => (state.vhost ? api.path('vhosts', state.vhost, 'channels') : '/api/channels');
  const list = listView({ id: 'channels', title: 'channels', url, columns: cols, sort: 'name' });
  appendTo(main, h('h1', null, 'Channels'), section('All channels', list.el));
  return { refresh: list.refresh };
}

export async function channel(ctx) {
  const { main, params, api } = ctx;
  const [name] = params;
  // "peer -> local (n)": the connection is the name without " (n)".
  const conn = name.replace(/ \(\d+\)$/, '');
  const factsEl = h('div');
  const consEl = h('div');
  appendTo(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/channels' }, 'Channels'), ' › '),
    h('h1', null, 'Channel ', h('span', { class: 'objname' }, name)),
    section('Overview', factsEl),
    section('Consumers', consEl),
  );
  async function refresh() {
    const chans = await api.get(api.path('connections', conn, 'channels'));
    const ch = chans.find((c) => c.name === name);
    if (!ch) { clear(factsEl, h('p', { class: 'empty' }, 'This channel is closed.')); clear(consEl); return; }
    clear(factsEl, facts([
      ['Connection', h('a', { href: link('connections', conn) }, conn)], ['Number', ch.number], ['Username', ch.user],
      ['Virtual host', ch.vhost], ['Mode', mode(ch) || 'none (neither confirm nor transactional)'], ['State', pill(ch.state, 'green')],
      ['Prefetch count', fmtNum(ch.prefetch_count)], ['Global prefetch count', fmtNum(ch.global_prefetch_count)],
      ['Messages unacknowledged', fmtNum(ch.messages_unacknowledged)], ['Consumers', fmtNum(ch.consumer_count)],
    ]));
    const cons = (await api.get(api.path('consumers', ch.vhost))).filter((c) => c.channel_details.name === name);
    clear(consEl, cons.length === 0 ? h('p', { class: 'empty' }, '… no consumers …') : h('div', { class: 'scroll' }, h('table', { class: 'list' },
      h('thead', null, h('tr', null, ['Consumer tag', 'Queue', 'Ack required', 'Exclusive', 'Prefetch', 'Arguments'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', null, cons.map((c) => h('tr', null, h('td', null, c.consumer_tag),
        h('td', null, h('a', { href: link('queues', c.queue.vhost, c.queue.name) }, c.queue.name)),
        h('td', null, c.ack_required ? '●' : '○'), h('td', null, c.exclusive ? '●' : '○'),
        h('td', { class: 'num' }, c.prefetch_count), h('td', null, args(c.arguments))))))));
  }
  return { refresh };
}
