// Overview: totals, charts of queued messages and message rates, the node
// and its listeners.

import { h, appendTo, clear, fmtNum, fmtRate, fmtBytes, fmtDuration, rateOf, section, facts, pill } from '../dom.js';
import { record, renderInto, rangeSelect, rangeTitle, rangeQuery, fromSamples } from '../chart.js';

export const rateAxis = (v) => `${+v.toFixed(2)}/s`;

export const RATE_SERIES = [
  { name: 'publish', label: 'Publish', color: 'a' },
  { name: 'confirm', label: 'Publisher confirm', color: 'b' },
  { name: 'deliver', label: 'Deliver (manual ack)', color: 'c' },
  { name: 'deliver_no_ack', label: 'Deliver (auto ack)', color: 'd' },
  { name: 'ack', label: 'Consumer ack', color: 'e' },
  { name: 'redeliver', label: 'Redelivered', color: 'f' },
  { name: 'get', label: 'Get (manual + auto ack)', color: 'g' },
  { name: 'unroutable', label: 'Unroutable (return + drop)', color: 'h' },
];

export const QUEUED_SERIES = [
  { name: 'ready', label: 'Ready', color: 'a' },
  { name: 'unacked', label: 'Unacked', color: 'c' },
  { name: 'total', label: 'Total', color: 'f' },
];

// RATE_DETAILS are the message_stats counters each rate series sums.
const RATE_DETAILS = {
  publish: ['publish'], confirm: ['confirm'], deliver: ['deliver'], deliver_no_ack: ['deliver_no_ack'], ack: ['ack'],
  redeliver: ['redeliver'], get: ['get', 'get_no_ack'], unroutable: ['return_unroutable', 'drop_unroutable'],
};

// rateHistory is the history of the rate series from the samples of
// message_stats ms (null without samples).
export function rateHistory(ms, names = RATE_DETAILS) {
  const defs = {};
  for (const [name, keys] of Object.entries(names)) defs[name] = { rate: true, details: keys.map((k) => ms && ms[`${k}_details`]) };
  return fromSamples(defs);
}

// queuedHistory is the history of ready, unacked and total messages from
// the samples of an object with the messages*_details of a queue or of
// queue_totals (null without samples).
export function queuedHistory(o) {
  return fromSamples({
    ready: { details: [o.messages_ready_details] },
    unacked: { details: [o.messages_unacknowledged_details] },
    total: { details: [o.messages_details] },
  });
}

// withNow ends the broker's history hist (up to a step and a sample
// behind) with the values of the answer itself, so that the line ends
// where the page's numbers are.
export function withNow(hist, now) {
  if (hist) hist.push({ t: Math.max(Date.now(), hist[hist.length - 1].t + 1), v: now });
  return hist;
}

export function rateSample(ms) {
  return {
    publish: rateOf(ms, 'publish'), confirm: rateOf(ms, 'confirm'), deliver: rateOf(ms, 'deliver'),
    deliver_no_ack: rateOf(ms, 'deliver_no_ack'), ack: rateOf(ms, 'ack'), redeliver: rateOf(ms, 'redeliver'),
    get: rateOf(ms, 'get') + rateOf(ms, 'get_no_ack'),
    unroutable: rateOf(ms, 'return_unroutable') + rateOf(ms, 'drop_unroutable'),
  };
}

function total(label, value, key, href) {
  const v = h('span', { class: 'value', 'data-total': key }, fmtNum(value));
  return h(href ? 'a' : 'div', { class: 'total', href }, v, h('span', { class: 'tlabel' }, label));
}

export default async function overview(ctx) {
  const { main, state, api } = ctx;
  const totalsEl = h('div', { class: 'totals' });
  const queuedEl = h('div');
  const ratesEl = h('div');
  const nodeEl = h('div');
  const listenersEl = h('div');
  const monitor = state.user.is('monitoring');
  appendTo(main,
    h('h1', null, 'Overview'),
    section('Totals', totalsEl),
    rangeSelect(() => refresh()),
    h('div', { class: 'charts' }, section('Queued messages', queuedEl), section('Message rates', ratesEl)),
    monitor ? section('Nodes', nodeEl) : null,
    section('Ports and contexts', listenersEl),
  );

  function drawCharts(o) {
    const qt = o.queue_totals || {};
    // The broker's samples; a restricted overview has none, and the page
    // samples it itself.
    const queuedNow = { ready: qt.messages_ready || 0, unacked: qt.messages_unacknowledged || 0, total: qt.messages || 0 };
    const ratesNow = rateSample(o.message_stats);
    let queued = withNow(queuedHistory(qt), queuedNow);
    let rates = withNow(rateHistory(o.message_stats), ratesNow);
    const local = !queued || !rates;
    if (!queued) queued = record('overview.queued', queuedNow);
    if (!rates) rates = record('overview.rates', ratesNow);
    renderInto(queuedEl, { title: `Queued messages (${rangeTitle()})`, series: QUEUED_SERIES, hist: queued, local });
    renderInto(ratesEl, { title: `Message rates (${rangeTitle()})`, series: RATE_SERIES, hist: rates, fmt: fmtRate, axis: rateAxis, local });
  }

  async function refresh() {
    const [o, nodes] = await Promise.all([api.get(`/api/overview?${rangeQuery()}`), monitor ? api.get('/api/nodes') : null]);
    state.overview = o;
    const ot = o.object_totals || {};
    const qt = o.queue_totals || {};
    clear(totalsEl,
      h('div', { class: 'group' }, h('h3', null, 'Global counts'),
        h('div', { class: 'tiles' },
          total('Connections', ot.connections, 'connections', '#/connections'),
          total('Channels', ot.channels, 'channels', '#/channels'),
          total('Exchanges', ot.exchanges, 'exchanges', '#/exchanges'),
          total('Queues', ot.queues, 'queues', '#/queues'),
          total('Consumers', ot.consumers, 'consumers'))),
      h('div', { class: 'group' }, h('h3', null, 'Messages'),
        h('div', { class: 'tiles' },
          total('Ready', qt.messages_ready, 'messages_ready'),
          total('Unacked', qt.messages_unacknowledged, 'messages_unacknowledged'),
          total('Total', qt.messages, 'messages'))));
    drawCharts(o);
    if (nodes) clear(nodeEl, nodeTable(nodes, o.product_version));
    clear(listenersEl, h('div', { class: 'scroll' }, h('table', { class: 'list' },
      h('thead', null, h('tr', null, ['Protocol', 'Bound to', 'Port'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', null, (o.listeners || []).map((l) => h('tr', null, h('td', null, l.protocol), h('td', null, l.ip_address), h('td', { class: 'num' }, l.port))),
        (o.contexts || []).map((c) => h('tr', null, h('td', null, `${c.description} (path ${c.path})`), h('td', null, ''), h('td', { class: 'num' }, c.port)))))));
  }
  return { refresh };
}

function gauge(used, limit, fmt, alarm, label) {
  const pct = limit > 0 ? Math.min(100, (used / limit) * 100) : 0;
  const bar = h('span', { class: 'bar' }, h('span', { class: ['fill', alarm ? 'alarm' : pct > 80 ? 'warn' : ''] }));
  bar.firstChild.style.width = `${pct.toFixed(1)}%`;
  return h('div', { class: ['gauge', alarm && 'alarmed'] },
    h('span', { class: 'gval' }, fmt(used)), bar,
    h('span', { class: 'glimit' }, limit ? `${label} ${fmt(limit)}` : ''),
    alarm ? pill('alarm', 'red') : null);
}

function nodeTable(nodes, version) {
  return h('div', { class: 'scroll' }, h('table', { class: 'list nodes' },
    h('thead', null, h('tr', null, ['Name', 'File descriptors', 'Memory', 'Disk space', 'Uptime', 'Goroutines', 'Info', 'Version'].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', null, nodes.map((n) => h('tr', { class: n.mem_alarm || n.disk_free_alarm ? 'alarmed' : null },
      h('td', null, n.name),
      h('td', null, gauge(n.fd_used, n.fd_total, fmtNum, false, 'available')),
      h('td', null, gauge(n.mem_used, n.mem_limit, fmtBytes, n.mem_alarm, 'high watermark')),
      h('td', null, disk(n)),
      h('td', null, fmtDuration(n.uptime)),
      h('td', { class: 'num' }, fmtNum(n.proc_used)),
      h('td', null, pill(n.type, 'grey'), ' ', pill(`rates: ${n.rates_mode}`, 'grey')),
      h('td', null, version))))));
}

function disk(n) {
  const el = h('div', { class: ['gauge', n.disk_free_alarm && 'alarmed'] },
    h('span', { class: 'gval' }, fmtBytes(n.disk_free)),
    h('span', { class: 'glimit' }, `free; low watermark ${fmtBytes(n.disk_free_limit)}`),
    n.disk_free_alarm ? pill('alarm', 'red') : null);
  return el;
}
