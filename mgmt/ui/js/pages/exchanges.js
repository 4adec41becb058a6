// Exchanges: the list with an add form, and an exchange's page with its
// bindings, a publish form and delete.

import { h, appendTo, clear, section, facts, link, args, pill } from '../dom.js';
import { listView } from '../table.js';
import { form, EXCHANGE_ARGS, parseHeaders } from '../forms.js';
import { listURL, vhostField, features, bindingTable, bindForm, deleteButton, exchangeName } from './common.js';

const PATHNAME = (n) => (n === '' ? 'amq.default' : n);

export async function exchanges(ctx) {
  const { main, state, api } = ctx;
  const cols = [
    state.vhost ? null : { key: 'vhost', title: 'Virtual host' },
    { key: 'name', title: 'Name', render: (x) => h('a', { href: link('exchanges', x.vhost, PATHNAME(x.name)) }, exchangeName(x.name)) },
    { key: 'type', title: 'Type' },
    { key: 'features', title: 'Features', sort: '', render: features },
  ].filter(Boolean);
  const list = listView({ id: 'exchanges', title: 'exchanges', url: () => listURL('exchanges', state), columns: cols, sort: 'name' });
  const types = (state.overview && state.overview.exchange_types || []).map((t) => t.name);
  const add = form({
    id: 'add-exchange',
    fields: [
      vhostField(state),
      { name: 'name', label: 'Name', required: true, keys: ['name', 'amq.'] },
      { name: 'type', label: 'Type', type: 'select', options: types.length ? types : ['direct', 'fanout', 'headers', 'topic'], keys: ['type'] },
      { name: 'durable', label: 'Durability', type: 'select', options: [['true', 'Durable'], ['false', 'Transient']], keys: ['durable'] },
      { name: 'auto_delete', label: 'Auto delete', type: 'select', options: [['false', 'No'], ['true', 'Yes']], keys: ['auto_delete'] },
      { name: 'internal', label: 'Internal', type: 'select', options: [['false', 'No'], ['true', 'Yes']], keys: ['internal'] },
      { name: 'arguments', label: 'Arguments', type: 'args', known: EXCHANGE_ARGS, keys: ['arg', 'alternate-exchange'] },
    ],
    submit: 'Add exchange',
    async onSubmit(v) {
      await api.put(api.path('exchanges', v.vhost, v.name), {
        type: v.type, durable: v.durable === 'true', auto_delete: v.auto_delete === 'true', internal: v.internal === 'true', arguments: v.arguments,
      });
      add.reset();
      list.refresh();
      return `Exchange ${v.name} added.`;
    },
  });
  appendTo(main, h('h1', null, 'Exchanges'), section('All exchanges', list.el), section('Add a new exchange', add.el));
  return { refresh: list.refresh };
}

export async function exchange(ctx) {
  const { main, params, api, navigate } = ctx;
  const [vhost, pname] = params;
  const name = pname === 'amq.default' ? '' : pname;
  const url = api.path('exchanges', vhost, PATHNAME(name));
  const factsEl = h('div');
  const outEl = h('div');
  const inEl = h('div');
  const refreshBindings = async () => {
    const [out, inc] = await Promise.all([api.get(`${url}/bindings/source`), api.get(`${url}/bindings/destination`)]);
    clear(outEl, name === '' ? h('p', { class: 'hint' }, 'The default exchange is implicitly bound to every queue, with a routing key equal to the queue name. It is not possible to explicitly bind to, or unbind from, the default exchange.')
      : bindingTable(out, { showSource: false, onChange: refreshBindings }));
    clear(inEl, bindingTable(inc, { showDest: false, onChange: refreshBindings }));
  };

  const pub = form({
    id: 'publish',
    fields: [
      { name: 'routing_key', label: 'Routing key', keys: ['routing_key'] },
      { name: 'delivery_mode', label: 'Delivery mode', type: 'select', options: [['1', '1 - Non-persistent'], ['2', '2 - Persistent']] },
      { name: 'headers', label: 'Headers', type: 'textarea', rows: 2, placeholder: 'key = value, one a line', keys: ['headers'] },
      { name: 'properties', label: 'Properties', type: 'textarea', rows: 2, placeholder: 'content_type = text/plain\nmessage_id = 42', keys: ['propert', 'content_type', 'expiration', 'priority'], hint: 'content_type, content_encoding, priority, correlation_id, reply_to, expiration, message_id, timestamp, type, user_id, app_id' },
      { name: 'payload', label: 'Payload', type: 'textarea', rows: 4, keys: ['payload'] },
      { name: 'payload_encoding', label: 'Payload encoding', type: 'select', options: [['string', 'String (default)'], ['base64', 'Base64']], keys: ['base64', 'payload_encoding'] },
    ],
    submit: 'Publish message',
    async onSubmit(v) {
      const props = parseHeaders('properties', v.properties);
      props.delivery_mode = Number(v.delivery_mode);
      const hdrs = parseHeaders('headers', v.headers);
      if (Object.keys(hdrs).length) props.headers = hdrs;
      const r = await api.post(`${url}/publish`, { routing_key: v.routing_key, properties: props, payload: v.payload, payload_encoding: v.payload_encoding });
      return r.routed ? 'Message published.' : 'Message published, but not routed.';
    },
  });

  appendTo(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/exchanges' }, 'Exchanges'), ' › ', vhost, ' › '),
    h('h1', null, 'Exchange ', h('span', { class: 'objname' }, exchangeName(name))),
    section('Overview', factsEl),
    section('Bindings', h('h3', null, 'This exchange → (bindings from it)'), outEl,
      name === '' ? null : [h('h3', null, 'Add binding from this exchange'), bindForm({ vhost, source: name, onDone: refreshBindings })],
      h('h3', null, '→ This exchange (bindings to it)'), inEl),
    section('Publish message', pub.el),
    name === '' || name.startsWith('amq.') ? null
      : section('Delete this exchange', h('div', { class: 'buttons' }, deleteButton('Delete exchange', `Delete exchange ${name}?`, url, () => navigate('#/exchanges')))),
  );

  async function refresh() {
    const x = await api.get(url);
    clear(factsEl, facts([
      ['Type', x.type], ['Features', features(x)], ['Virtual host', x.vhost], ['Arguments', args(x.arguments)],
      ['Policy', x.policy || ''],
    ]));
    await refreshBindings();
  }
  return { refresh };
}
