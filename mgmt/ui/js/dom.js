// DOM helpers: elements are built with h(), never from HTML strings, so a
// queue or user name is always text and never markup.

export function h(tag, attrs, ...children) {
  const svg = tag.startsWith('svg:');
  const el = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4)) : document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'class') el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k === 'value' && !svg) el.value = v;
      else if (k === 'checked' || k === 'selected' || k === 'disabled') el[k] = !!v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// appendTo appends children to el, skipping null, undefined and false (which
// Element.append would insert as text).
export function appendTo(el, ...children) {
  append(el, children);
  return el;
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// Formatting, as RabbitMQ's UI shows numbers.
export function fmtNum(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return '—';
  return Number(n).toLocaleString('en-US');
}

export function fmtRate(r) {
  if (r === undefined || r === null) return '—';
  return `${Number(r).toFixed(r >= 100 ? 0 : 1)}/s`;
}

export function fmtBytes(b) {
  if (b === undefined || b === null) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = Number(b);
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return `${v.toFixed(i === 0 ? 0 : v < 10 ? 1 : 0)} ${units[i]}`;
}

export function fmtDuration(ms) {
  let s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400); s -= d * 86400;
  const hh = Math.floor(s / 3600); s -= hh * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  if (d > 0) return `${d}d ${hh}h`;
  if (hh > 0) return `${hh}h ${m}m`;
  if (m > 0) return `${m}m ${s}s`;
  return `${s}s`;
}

export function fmtValue(v) {
  if (v === undefined || v === null) return '';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

export function rateOf(stats, key) {
  const d = stats && stats[`${key}_details`];
  return d ? d.rate : 0;
}

// A hash link to an object's page: #/queues/<vhost>/<name>.
export function link(...segs) {
  return '#/' + segs.map((s) => encodeURIComponent(s)).join('/');
}

export function pill(text, kind) {
  return h('span', { class: ['pill', kind] }, text);
}

// A definition list of facts.
export function facts(rows) {
  return h('table', { class: 'facts' }, h('tbody', null,
    rows.filter(Boolean).map(([k, v]) => h('tr', null, h('th', { scope: 'row' }, k), h('td', null, v)))));
}

// Args renders an AMQP table (arguments, headers) as key = value lines.
export function args(obj) {
  const keys = Object.keys(obj || {});
  if (keys.length === 0) return '';
  return h('span', { class: 'args' }, keys.map((k) => h('span', { class: 'arg' }, h('b', null, k), ': ', fmtValue(obj[k]))));
}

// Section is a titled, collapsible block like RabbitMQ's.
export function section(title, ...body) {
  const d = h('details', { class: 'section', open: true });
  d.append(h('summary', null, h('h2', null, title)), h('div', { class: 'section-body' }, ...body));
  return d;
}

// notify shows a short message at the top of the page.
export function notify(text, kind = 'ok') {
  let box = document.getElementById('notify');
  if (!box) {
    box = h('div', { id: 'notify', role: 'status', 'aria-live': 'polite' });
    document.body.append(box);
  }
  const n = h('div', { class: ['note', kind] }, text);
  box.append(n);
  setTimeout(() => n.remove(), kind === 'error' ? 8000 : 4000);
}

// confirmAction asks before a destructive action, in a modal <dialog>
// (keyboard: Tab between the buttons, Escape cancels). Resolves true on
// confirmation.
export function confirmAction(text, action = 'Delete') {
  return new Promise((resolve) => {
    const ok = h('button', { type: 'submit', class: 'danger', value: 'ok' }, action);
    const dlg = h('dialog', { class: 'confirm', 'aria-label': 'Confirm' },
      h('form', { method: 'dialog' },
        h('p', null, text),
        h('div', { class: 'buttons' },
          h('button', { type: 'submit', value: 'cancel', class: 'secondary' }, 'Cancel'), ok)));
    dlg.addEventListener('close', () => {
      resolve(dlg.returnValue === 'ok');
      dlg.remove();
    });
    document.body.append(dlg);
    dlg.showModal();
    ok.focus();
  });
}
