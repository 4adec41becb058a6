// Line charts drawn as SVG, and the sample history they draw. The broker
// keeps ten minutes of samples of the node and of each queue, and sends
// them when asked with RabbitMQ's range parameters (rangeQuery), so a page
// opened late shows what happened before; fromSamples turns them into a
// chart's history. Where the API has none (a management user's overview,
// whose totals are not the node's), the page samples the current values
// and rates at each refresh with record, for the session's lifetime.

import { h, clear, fmtNum } from './dom.js';

const KEEP_MS = 10 * 60 * 1000;
const histories = new Map();

// record adds a sample {name: value} for the object key at time t.
export function record(key, values, t = Date.now()) {
  let hist = histories.get(key);
  if (!hist) { hist = []; histories.set(key, hist); }
  const last = hist[hist.length - 1];
  if (last && t - last.t < 500) hist[hist.length - 1] = { t, v: values };
  else hist.push({ t, v: values });
  while (hist.length && hist[0].t < t - KEEP_MS) hist.shift();
  return hist;
}

export function history(key) { return histories.get(key) || []; }

// STEP is the interval of the samples asked for, in seconds (the broker's).
const STEP = 5;

// rangeQuery is the query string that asks the API for the samples of the
// chart range: lengths (queued messages) and message rates.
export function rangeQuery() {
  const age = Math.round(range() / 1000);
  return `lengths_age=${age}&lengths_incr=${STEP}&msg_rates_age=${age}&msg_rates_incr=${STEP}`;
}

// fromSamples builds a chart history from the API's samples. defs maps
// each series name to {details: [d, ...], rate}: the {name}_details
// objects it sums, as values (queue lengths) or, with rate, as counters
// whose change between two samples is the rate. It returns null when a
// details object has no samples (the API kept none, or none yet).
export function fromSamples(defs) {
  const byName = {};
  let times = null;
  for (const [name, def] of Object.entries(defs)) {
    const sum = new Map();
    for (const d of def.details) {
      if (!d || !Array.isArray(d.samples)) return null;
      for (const s of d.samples) sum.set(s.timestamp, (sum.get(s.timestamp) || 0) + s.sample);
    }
    byName[name] = sum;
    if (!times) times = [...sum.keys()].sort((a, b) => a - b);
  }
  const hist = [];
  (times || []).forEach((t, i) => {
    const v = {};
    for (const [name, def] of Object.entries(defs)) {
      const cur = byName[name].get(t) || 0;
      if (!def.rate) { v[name] = cur; continue; }
      if (i === 0) return;
      const prev = byName[name].get(times[i - 1]) || 0;
      v[name] = Math.max(0, (cur - prev) / ((t - times[i - 1]) / 1000));
    }
    if (Object.keys(v).length) hist.push({ t, v });
  });
  // None yet (an object younger than a step): the page samples it.
  return hist.length ? hist : null;
}

const H = 150;

const RANGES = [[60000, 'last minute'], [5 * 60000, 'last five minutes'], [10 * 60000, 'last ten minutes']];

// range is the charts' time window, chosen with rangeSelect.
export function range() {
  return Number(sessionStorage.getItem('warren.range')) || 60000;
}

// rangeSelect chooses the charts' window; onChange redraws.
export function rangeSelect(onChange) {
  const sel = h('select', { 'aria-label': 'Chart range' }, RANGES.map(([ms, t]) => h('option', { value: ms, selected: ms === range() }, t)));
  sel.addEventListener('change', () => { sessionStorage.setItem('warren.range', sel.value); onChange(); });
  return h('label', { class: 'range' }, 'Charts show the', sel);
}

export function rangeTitle() {
  const r = RANGES.find(([ms]) => ms === range());
  return r ? r[1] : '';
}
const PAD = { l: 48, r: 8, t: 10, b: 20 };

// chart draws series [{name, label, color}] of the samples in hist, over
// the window windowMs ending now; fmt formats the axis and the legend.
export function chart(opts) {
  const fig = h('figure', { class: 'chartbox', dataset: { source: opts.local ? 'page' : 'broker' } },
    h('figcaption', null, opts.title, opts.local ? h('span', { class: 'sub' }, 'sampled by this page since it opened') : null),
    h('div', { class: 'chartrow' }, h('div', { class: 'plot' }), legend(opts)));
  fig.querySelector('.plot').append(plot(opts, 560));
  return fig;
}

// plot is the SVG drawn at width user units; fit redraws it at the width
// its box has on the page, so that text is not stretched.
function plot({ title, series, hist, fmt = fmtNum, axis, windowMs = range() }, W) {
  axis = axis || fmt;
  const now = hist.length ? hist[hist.length - 1].t : Date.now();
  const t0 = now - windowMs;
  const pts = hist.filter((s) => s.t >= t0);
  let max = 0;
  for (const s of pts) for (const se of series) max = Math.max(max, s.v[se.name] || 0);
  const top = niceCeil(max);
  const x = (t) => PAD.l + ((t - t0) / windowMs) * (W - PAD.l - PAD.r);
  const y = (v) => PAD.t + (1 - v / top) * (H - PAD.t - PAD.b);
  const svg = h('svg:svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'chart', role: 'img', 'aria-label': title });
  for (let i = 0; i <= 4; i++) {
    const v = (top * i) / 4;
    svg.append(h('svg:line', { x1: PAD.l, x2: W - PAD.r, y1: y(v), y2: y(v), class: 'grid' }));
    svg.append(h('svg:text', { x: PAD.l - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' }, axis(v)));
  }
  const step = windowMs <= 60000 ? 15000 : windowMs <= 5 * 60000 ? 60000 : 120000;
  for (let d = 0; d <= windowMs; d += step) {
    const label = d === 0 ? 'now' : d < 60000 ? `-${d / 1000}s` : `-${d / 60000}m`;
    svg.append(h('svg:text', { x: x(now - d), y: H - 4, class: 'axis', 'text-anchor': d === 0 ? 'end' : d === windowMs ? 'start' : 'middle' }, label));
  }
  for (const se of series) {
    if (pts.length === 0) continue;
    // A gap in the samples (the page was elsewhere) is left open.
    const d = pts.map((s, i) => `${i && s.t - pts[i - 1].t < 15000 ? 'L' : 'M'}${x(s.t).toFixed(1)},${y(s.v[se.name] || 0).toFixed(1)}`).join('');
    if (pts.length === 1) {
      svg.append(h('svg:circle', { cx: x(pts[0].t), cy: y(pts[0].v[se.name] || 0), r: 2.5, class: `s-${se.color}` }));
    } else {
      svg.append(h('svg:path', { d, class: ['line', `s-${se.color}`] }));
    }
  }
  return svg;
}

function legend({ series, hist, fmt = fmtNum }) {
  const last = hist[hist.length - 1];
  return h('ul', { class: 'legend' }, series.map((se) => h('li', null,
    h('span', { class: ['swatch', `b-${se.color}`], 'aria-hidden': 'true' }),
    h('span', { class: 'lname' }, se.label),
    h('span', { class: 'lval', dataset: { series: se.name } }, last ? fmt(last.v[se.name] || 0) : '—'))));
}

function niceCeil(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// renderInto replaces el's content with a chart drawn at the width the
// page gives it.
export function renderInto(el, opts) {
  const fig = chart(opts);
  clear(el, fig);
  const box = fig.querySelector('.plot');
  const w = Math.floor(box.clientWidth);
  if (w > 50 && w !== 560) box.replaceChildren(plot(opts, w));
}
