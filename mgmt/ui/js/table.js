// A sortable, filterable, paged list. With `url` it pages on the server
// (page, page_size, name, use_regex, sort, sort_reverse: the API's
// parameters, as RabbitMQ's), so a list of 10,000 queues costs one page
// of rows; with `load` it pages a small list in the browser.

import { h, clear, fmtNum } from './dom.js';
import * as api from './api.js';

const SIZES = [20, 50, 100, 500];

export function listView(opts) {
  const id = `warren.list.${opts.id}`;
  const saved = JSON.parse(sessionStorage.getItem(id) || '{}');
  const st = {
    page: 1,
    size: saved.size || opts.pageSize || 100,
    name: saved.name || '',
    regex: !!saved.regex,
    sort: saved.sort ?? opts.sort ?? '',
    reverse: !!saved.reverse,
  };
  const save = () => sessionStorage.setItem(id, JSON.stringify({ size: st.size, name: st.name, regex: st.regex, sort: st.sort, reverse: st.reverse }));

  const filter = h('input', { type: 'search', value: st.name, placeholder: 'Filter by name', 'aria-label': `Filter ${opts.title || 'list'} by name`, class: 'filter' });
  const regex = h('input', { type: 'checkbox', checked: st.regex });
  const summary = h('span', { class: 'summary', 'aria-live': 'polite' });
  const pager = h('span', { class: 'pager' });
  const sizeSel = h('select', { 'aria-label': 'Page size' }, SIZES.map((n) => h('option', { value: n, selected: n === st.size }, `${n} per page`)));
  const err = h('div', { class: 'field-error', role: 'alert', hidden: true });
  const thead = h('thead');
  const tbody = h('tbody');
  const table = h('table', { class: 'list', 'data-list': opts.id }, thead, tbody);
  let timer;
  filter.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => { st.name = filter.value; st.page = 1; save(); refresh(); }, 250);
  });
  regex.addEventListener('change', () => { st.regex = regex.checked; st.page = 1; save(); refresh(); });
  sizeSel.addEventListener('change', () => { st.size = Number(sizeSel.value); st.page = 1; save(); refresh(); });

  const el = h('div', { class: 'listview' },
    h('div', { class: 'toolbar' },
      opts.filter === false ? null : [filter, h('label', { class: 'check' }, regex, 'Regex')],
      summary, h('span', { class: 'grow' }), pager, sizeSel),
    err,
    h('div', { class: 'scroll' }, table));

  function renderHead() {
    clear(thead, h('tr', null, opts.columns.map((c) => {
      const sortKey = c.sort === undefined ? c.key : c.sort;
      if (!sortKey) return h('th', { class: c.cls, scope: 'col' }, c.title);
      const active = st.sort === sortKey;
      const b = h('button', { type: 'button', class: 'sort' }, c.title, h('span', { class: 'arrow', 'aria-hidden': 'true' }, active ? (st.reverse ? '▼' : '▲') : ''));
      b.addEventListener('click', () => {
        if (active) st.reverse = !st.reverse; else { st.sort = sortKey; st.reverse = !!c.desc; }
        st.page = 1; save(); renderHead(); refresh();
      });
      return h('th', { class: c.cls, scope: 'col', 'aria-sort': active ? (st.reverse ? 'descending' : 'ascending') : 'none' }, b);
    })));
  }

  function renderPager(p) {
    const prev = h('button', { type: 'button', class: 'secondary small', disabled: p.page <= 1, 'aria-label': 'Previous page' }, '‹');
    const next = h('button', { type: 'button', class: 'secondary small', disabled: p.page >= p.page_count, 'aria-label': 'Next page' }, '›');
    prev.addEventListener('click', () => { st.page--; refresh(); });
    next.addEventListener('click', () => { st.page++; refresh(); });
    clear(pager, prev, h('span', { class: 'pageno' }, `Page ${p.page} of ${p.page_count}`), next);
  }

  async function fetchPage() {
    if (opts.url) {
      const q = new URLSearchParams({ page: st.page, page_size: st.size });
      if (st.name) { q.set('name', st.name); if (st.regex) q.set('use_regex', 'true'); }
      if (st.sort) { q.set('sort', st.sort); if (st.reverse) q.set('sort_reverse', 'true'); }
      const u = opts.url();
      return api.get(`${u}${u.includes('?') ? '&' : '?'}${q}`);
    }
    let all = await opts.load();
    const total = all.length;
    if (st.name) {
      let m;
      if (st.regex) { const re = new RegExp(st.name); m = (s) => re.test(s); } else m = (s) => s.includes(st.name);
      all = all.filter((it) => m(String(it.name ?? '')));
    }
    if (st.sort) {
      const get = (it) => st.sort.split('.').reduce((v, k) => (v == null ? v : v[k]), it);
      all = [...all].sort((a, b) => {
        const x = get(a); const y = get(b);
        return typeof x === 'number' && typeof y === 'number' ? x - y : String(x ?? '').localeCompare(String(y ?? ''));
      });
      if (st.reverse) all.reverse();
    }
    const count = Math.max(1, Math.ceil(all.length / st.size));
    const page = Math.min(st.page, count);
    return { items: all.slice((page - 1) * st.size, page * st.size), page, page_count: count, filtered_count: all.length, total_count: total };
  }

  let seq = 0;
  async function refresh() {
    const mine = ++seq;
    let p;
    try {
      p = await fetchPage();
    } catch (e) {
      if (mine !== seq) return;
      if (e.status === 400 && st.page > 1 && /page out of range/.test(e.reason)) { st.page = 1; return refresh(); }
      err.textContent = e.reason; err.hidden = false;
      return;
    }
    if (mine !== seq) return;
    err.hidden = true;
    st.page = p.page;
    // Keep keyboard focus where it is: do not rebuild rows under it.
    if (tbody.contains(document.activeElement) && opts.keepFocus !== false && el.dataset.loaded) return;
    clear(tbody, p.items.length === 0
      ? h('tr', null, h('td', { colspan: opts.columns.length, class: 'empty' }, st.name ? 'No items match the filter.' : `No ${opts.title || 'items'}.`))
      : p.items.map((it) => h('tr', null, opts.columns.map((c) => h('td', { class: c.cls, 'data-col': c.key }, c.render ? c.render(it) : fmtCell(it, c.key))))));
    const filtered = p.filtered_count !== p.total_count ? ` (filtered from ${fmtNum(p.total_count)})` : '';
    summary.textContent = `${fmtNum(p.filtered_count)} ${p.filtered_count === 1 ? 'item' : 'items'}${filtered}`;
    renderPager(p);
    el.dataset.loaded = '1';
    el.dispatchEvent(new CustomEvent('rendered', { detail: p }));
  }

  renderHead();
  return { el, refresh };
}

function fmtCell(it, key) {
  const v = key.split('.').reduce((o, k) => (o == null ? o : o[k]), it);
  if (typeof v === 'number') return fmtNum(v);
  if (typeof v === 'boolean') return v ? '●' : '○';
  return v ?? '';
}
