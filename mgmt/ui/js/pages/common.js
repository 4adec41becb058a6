// Pieces shared by the pages: vhost choice, feature pills, binding tables.

import { h, clear, pill, link, args, notify, confirmAction } from '../dom.js';
import { form, EXCHANGE_ARGS } from '../forms.js';
import * as api from '../api.js';

// listURL is the list endpoint for the selected vhost (all when none).
export function listURL(kind, state) {
  return state.vhost ? api.path(kind, state.vhost) : `/api/${kind}`;
}

export function vhostField(state) {
  const names = state.vhosts || ['/'];
  return { name: 'vhost', label: 'Virtual host', type: 'select', options: names, value: state.vhost || names[0], keys: [] };
}

// features shows an object's flags as RabbitMQ's short pills.
export function features(o) {
  const out = [];
  if (o.durable) out.push(pill('D', 'blue', 'durable'));
  if (o.auto_delete) out.push(pill('AD', 'grey'));
  if (o.exclusive) out.push(pill('Excl', 'grey'));
  if (o.internal) out.push(pill('I', 'grey'));
  const abbrev = {
    'x-message-ttl': 'TTL', 'x-expires': 'Exp', 'x-max-length': 'Lim', 'x-max-length-bytes': 'Lim B',
    'x-dead-letter-exchange': 'DLX', 'x-dead-letter-routing-key': 'DLK', 'x-max-priority': 'Pri',
    'x-single-active-consumer': 'SAC', 'x-overflow': 'Ovf', 'x-queue-mode': 'Mode', 'alternate-exchange': 'AE',
    'x-delivery-limit': 'DL',
  };
  for (const k of Object.keys(o.arguments || {})) {
    if (k === 'x-queue-type') continue;
    const p = pill(abbrev[k] || 'Args', 'grey');
    p.title = `${k}: ${JSON.stringify(o.arguments[k])}`;
    out.push(p);
  }
  if (o.policy) out.push(pill(o.policy, 'purple'));
  return h('span', { class: 'features' }, out);
}

export function exchangeName(n) { return n === '' ? '(AMQP default)' : n; }

// bindingTable lists bindings with an Unbind button each.
export function bindingTable(items, { showSource = true, showDest = true, onChange }) {
  if (!items.length) return h('p', { class: 'empty' }, '… no bindings …');
  return h('div', { class: 'scroll' }, h('table', { class: 'list bindings' },
    h('thead', null, h('tr', null,
      showSource ? h('th', { scope: 'col' }, 'From') : null,
      showDest ? h('th', { scope: 'col' }, 'To') : null,
      h('th', { scope: 'col' }, 'Routing key'), h('th', { scope: 'col' }, 'Arguments'), h('th', { scope: 'col' }, ''))),
    h('tbody', null, items.map((b) => {
      const unbind = b.source === '' ? h('span', { class: 'hint' }, '(default binding)') : h('button', { type: 'button', class: 'secondary small' }, 'Unbind');
      if (b.source !== '') {
        unbind.addEventListener('click', async () => {
          const kind = b.destination_type === 'queue' ? 'q' : 'e';
          try {
            await api.del(api.path('bindings', b.vhost, 'e', b.source, kind, b.destination, b.properties_key));
            notify(`Unbound ${b.routing_key ? `"${b.routing_key}"` : ''} from ${b.source}.`);
            onChange && onChange();
          } catch (e) { notify(e.reason, 'error'); }
        });
      }
      return h('tr', null,
        showSource ? h('td', null, b.source === '' ? '(AMQP default)' : h('a', { href: link('exchanges', b.vhost, b.source) }, b.source)) : null,
        showDest ? h('td', null, h('a', { href: link(b.destination_type === 'queue' ? 'queues' : 'exchanges', b.vhost, b.destination) }, b.destination), ' ', pill(b.destination_type, 'grey')) : null,
        h('td', null, h('code', null, b.routing_key)), h('td', null, args(b.arguments)), h('td', null, unbind));
    }))));
}

// bindForm adds a binding: from an exchange to this queue, or from this
// exchange to a queue or an exchange.
export function bindForm({ vhost, source, dest, destType, onDone }) {
  const fields = [];
  if (source === undefined) fields.push({ name: 'source', label: 'From exchange', required: true, keys: ['source'] });
  else fields.push({ name: 'dtype', label: 'To', type: 'select', options: [['queue', 'Queue'], ['exchange', 'Exchange']] },
    { name: 'dest', label: 'Name', required: true, keys: ['destination'] });
  fields.push({ name: 'routing_key', label: 'Routing key', keys: ['routing_key'] },
    { name: 'arguments', label: 'Arguments', type: 'args', keys: ['arguments'], known: [['x-match', 'String', 'headers exchange: all or any']] });
  const f = form({
    id: 'bind-form',
    fields,
    submit: 'Bind',
    async onSubmit(v) {
      const src = source === undefined ? v.source : source;
      const dst = dest === undefined ? v.dest : dest;
      const kind = (destType || v.dtype) === 'queue' ? 'q' : 'e';
      try {
        await api.post(api.path('bindings', vhost, 'e', src === '' ? 'amq.default' : src, kind, dst), { routing_key: v.routing_key, arguments: v.arguments });
      } catch (e) {
        if (e.status === 404) {
          const which = source === undefined ? 'source' : 'dest';
          f.showError(which, `Not found: check that the ${source === undefined ? 'exchange' : (destType || v.dtype)} exists in this virtual host.`);
          return '';
        }
        throw e;
      }
      f.reset();
      onDone && onDone();
      return 'Binding added.';
    },
  });
  return f.el;
}

// deleteButton deletes url after asking.
export function deleteButton(label, question, url, after) {
  const b = h('button', { type: 'button', class: 'danger' }, label);
  b.addEventListener('click', async () => {
    if (!(await confirmAction(question, label))) return;
    try {
      await api.del(url);
      notify(`${label}: done.`);
      after && after();
    } catch (e) { notify(e.reason, 'error'); }
  });
  return b;
}

export { EXCHANGE_ARGS, clear };
