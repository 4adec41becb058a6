// Forms: labelled fields, a submit button, and errors shown next to the
// field they are about, in the API's words.

import { h, clear, notify } from './dom.js';

let uid = 0;

// form builds a <form>. fields: [{name, label, type, options, value,
// required, hint, keys}]; keys are words that, found in an API error's
// reason, tie the error to this field (the field's name by default).
// onSubmit(values) may throw an APIError; a resolved string is shown as a
// success note.
export function form({ id, fields, submit, onSubmit, cls }) {
  const controls = {};
  const errors = {};
  const formErr = h('div', { class: 'field-error form-error', role: 'alert', hidden: true });
  const rows = fields.map((f) => {
    const fid = `f${++uid}`;
    const errEl = h('div', { class: 'field-error', id: `${fid}-err`, role: 'alert', hidden: true });
    errors[f.name] = errEl;
    let ctl;
    switch (f.type) {
      case 'select':
        ctl = h('select', { id: fid, name: f.name }, (f.options || []).map((o) => {
          const [v, t] = Array.isArray(o) ? o : [o, o];
          return h('option', { value: v, selected: v === f.value }, t);
        }));
        break;
      case 'checkbox':
        ctl = h('input', { id: fid, name: f.name, type: 'checkbox', checked: !!f.value });
        break;
      case 'textarea':
        ctl = h('textarea', { id: fid, name: f.name, rows: f.rows || 4, placeholder: f.placeholder }, f.value || '');
        break;
      case 'args':
        ctl = argsEditor(fid, f);
        break;
      case 'file':
        ctl = h('input', { id: fid, name: f.name, type: 'file', accept: f.accept });
        break;
      default:
        ctl = h('input', { id: fid, name: f.name, type: f.type || 'text', value: f.value ?? '', placeholder: f.placeholder, autocomplete: f.autocomplete || 'off', required: f.required, spellcheck: 'false' });
    }
    if (f.type !== 'args') ctl.setAttribute('aria-describedby', `${fid}-err`);
    controls[f.name] = ctl;
    const label = f.type === 'args' ? h('span', { class: 'label', id: `${fid}-label` }, f.label) : h('label', { for: fid, class: 'label' }, f.label);
    return h('div', { class: ['row', f.type === 'checkbox' && 'row-check'], dataset: { field: f.name } },
      label, h('div', { class: 'control' }, ctl, f.hint ? h('div', { class: 'hint' }, f.hint) : null, errEl));
  });
  const button = h('button', { type: 'submit' }, submit);
  const el = h('form', { class: ['form', cls], id, novalidate: true }, rows, h('div', { class: 'row' }, h('span', { class: 'label' }), h('div', { class: 'control' }, button, formErr)));

  function clearErrors() {
    for (const [n, e] of Object.entries(errors)) { e.hidden = true; e.textContent = ''; controls[n].removeAttribute('aria-invalid'); }
    formErr.hidden = true;
  }
  function showError(name, msg) {
    const e = name && errors[name];
    if (!e) { formErr.textContent = msg; formErr.hidden = false; return; }
    e.textContent = msg; e.hidden = false;
    controls[name].setAttribute('aria-invalid', 'true');
    (controls[name].querySelector?.('input') || controls[name]).focus?.();
  }
  function values() {
    const v = {};
    for (const f of fields) {
      const c = controls[f.name];
      if (f.type === 'checkbox') v[f.name] = c.checked;
      else if (f.type === 'args') v[f.name] = c.value();
      else if (f.type === 'file') v[f.name] = c.files[0];
      else v[f.name] = c.value;
    }
    return v;
  }
  el.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors();
    for (const f of fields) {
      if (f.required && !String(controls[f.name].value ?? '').trim() && f.type !== 'args' && f.type !== 'file') {
        showError(f.name, `${f.label} is required`);
        return;
      }
    }
    let v;
    try {
      v = values();
    } catch (e) {
      showError(e.field, e.message);
      return;
    }
    button.disabled = true;
    try {
      const msg = await onSubmit(v, el);
      if (msg) notify(msg);
    } catch (e) {
      const reason = e.reason || e.message;
      // The field named first in the reason is the one it is about.
      let f = null;
      let at = Infinity;
      for (const fd of fields) {
        for (const k of fd.keys || [fd.name]) {
          const i = reason.indexOf(k);
          if (i >= 0 && i < at) { at = i; f = fd; }
        }
      }
      showError(f ? f.name : null, reason);
    } finally {
      button.disabled = false;
    }
  });
  return { el, controls, values, showError, reset: () => { el.reset(); for (const f of fields) if (f.type === 'args') controls[f.name].reset(); } };
}

export class FieldError extends Error {
  constructor(field, message) { super(message); this.field = field; }
}

// argsEditor edits an AMQP table: rows of key, value and type, plus the
// well-known keys offered as buttons.
function argsEditor(fid, f) {
  const rowsEl = h('div', { class: 'args-rows' });
  const wrap = h('div', { class: 'args-editor', role: 'group', 'aria-labelledby': `${fid}-label`, 'aria-describedby': `${fid}-err` }, rowsEl);
  const addRow = (key = '', val = '', type = 'String') => {
    const k = h('input', { type: 'text', value: key, placeholder: 'key', 'aria-label': 'Argument key', spellcheck: 'false' });
    const v = h('input', { type: 'text', value: val, placeholder: 'value', 'aria-label': 'Argument value', spellcheck: 'false' });
    const t = h('select', { 'aria-label': 'Argument type' }, ['String', 'Number', 'Boolean', 'List'].map((x) => h('option', { selected: x === type }, x)));
    const rm = h('button', { type: 'button', class: 'link remove', 'aria-label': 'Remove argument' }, '×');
    const row = h('div', { class: 'args-row' }, k, h('span', null, '='), v, t, rm);
    rm.addEventListener('click', () => { row.remove(); if (!rowsEl.children.length) addRow(); });
    k.addEventListener('input', () => { if (row === rowsEl.lastElementChild && k.value) addRow(); });
    rowsEl.append(row);
    return row;
  };
  const known = (f.known || []).map(([key, type, hint]) => {
    const b = h('button', { type: 'button', class: 'chip', title: hint }, key);
    b.addEventListener('click', () => {
      let row = [...rowsEl.children].find((r) => !r.children[0].value);
      if (!row) row = addRow();
      row.children[0].value = key;
      row.children[3].value = type;
      row.children[2].focus();
      if (row === rowsEl.lastElementChild) addRow();
    });
    return b;
  });
  if (known.length) wrap.append(h('div', { class: 'known' }, h('span', { class: 'hint' }, 'Add '), known));
  addRow();
  wrap.reset = () => { clear(rowsEl); addRow(); };
  wrap.value = () => {
    const out = {};
    for (const r of rowsEl.children) {
      const key = r.children[0].value.trim();
      const raw = r.children[2].value;
      if (!key) continue;
      const type = r.children[3].value;
      out[key] = convert(f.name, key, raw, type);
    }
    return out;
  };
  return wrap;
}

function convert(field, key, raw, type) {
  switch (type) {
    case 'Number': {
      const n = Number(raw);
      if (raw.trim() === '' || Number.isNaN(n)) throw new FieldError(field, `${key}: "${raw}" is not a number`);
      return n;
    }
    case 'Boolean':
      if (!/^(true|false)$/i.test(raw.trim())) throw new FieldError(field, `${key}: a boolean is true or false`);
      return raw.trim().toLowerCase() === 'true';
    case 'List':
      try {
        const v = JSON.parse(raw);
        if (Array.isArray(v)) return v;
      } catch { /* a comma-separated list */ }
      return raw.split(',').map((s) => s.trim()).filter(Boolean);
    default:
      return raw;
  }
}

export const QUEUE_ARGS = [
  ['x-message-ttl', 'Number', 'How long a message published to the queue can live before it is discarded (milliseconds)'],
  ['x-expires', 'Number', 'How long the queue can be unused before it is deleted (milliseconds)'],
  ['x-max-length', 'Number', 'How many ready messages the queue can hold'],
  ['x-max-length-bytes', 'Number', 'Total body size of ready messages the queue can hold'],
  ['x-overflow', 'String', 'drop-head, reject-publish or reject-publish-dlx'],
  ['x-dead-letter-exchange', 'String', 'Exchange that rejected or expired messages are republished to'],
  ['x-dead-letter-routing-key', 'String', 'Routing key for dead-lettered messages'],
  ['x-single-active-consumer', 'Boolean', 'Deliver to one consumer at a time'],
  ['x-max-priority', 'Number', 'Highest message priority the queue supports'],
  ['x-queue-mode', 'String', 'lazy keeps messages on disk'],
  ['x-delivery-limit', 'Number', 'Quorum queues: how many times a message is delivered before it is dead-lettered'],
];

export const EXCHANGE_ARGS = [
  ['alternate-exchange', 'String', 'Messages that this exchange cannot route go to this exchange'],
];

// parseHeaders reads "key = value" lines (values that parse as JSON numbers
// or booleans are sent as such).
export function parseHeaders(field, text) {
  const out = {};
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const i = line.indexOf('=');
    if (i < 1) throw new FieldError(field, `"${line.trim()}": write headers as key = value`);
    const k = line.slice(0, i).trim();
    const v = line.slice(i + 1).trim();
    out[k] = /^-?\d+(\.\d+)?$/.test(v) ? Number(v) : v === 'true' ? true : v === 'false' ? false : v;
  }
  return out;
}
