// The management API client. Credentials live in sessionStorage (this tab
// only, gone when it closes), never in a URL or a cookie; every request
// carries them as an explicit Authorization header, so the browser never
// attaches them on its own to a request another site makes (docs/ui.md).

const KEY = 'warren.credentials';

export class APIError extends Error {
  constructor(status, error, reason) {
    super(reason || error || `HTTP ${status}`);
    this.status = status;
    this.error = error;
    this.reason = reason || error || `HTTP ${status}`;
  }
}

export function saveCredentials(user, pass) {
  // btoa takes Latin-1: encode the UTF-8 bytes of user:pass first.
  const bytes = new TextEncoder().encode(`${user}:${pass}`);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  sessionStorage.setItem(KEY, JSON.stringify({ user, auth: btoa(bin) }));
}

export function clearCredentials() {
  sessionStorage.removeItem(KEY);
}

export function credentials() {
  try {
    const c = JSON.parse(sessionStorage.getItem(KEY) || 'null');
    return c && c.auth ? c : null;
  } catch {
    return null;
  }
}

let onUnauthorized = () => {};
export function setUnauthorizedHandler(f) { onUnauthorized = f; }

// Encodes each path segment: "/" as a vhost becomes %2F, as the API wants.
export function path(...segs) {
  return '/api/' + segs.map((s) => encodeURIComponent(s)).join('/');
}

export async function request(method, url, body, opts = {}) {
  const c = credentials();
  const headers = { Accept: 'application/json' };
  if (c) headers.Authorization = `Basic ${c.auth}`;
  const init = { method, headers, credentials: 'omit', cache: 'no-store', redirect: 'error' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  Object.assign(headers, opts.headers || {});
  const resp = await fetch(url, init);
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = text; }
  }
  if (!resp.ok) {
    const err = new APIError(resp.status, data && data.error, data && reasonText(data.reason));
    if (resp.status === 401 && !opts.login && !(data && data.error === 'not_authorised')) onUnauthorized(err);
    throw err;
  }
  return data;
}

// reasonText renders an API reason, which may be a JSON value rather than
// a string (RabbitMQ sends some Erlang terms as lists).
function reasonText(r) {
  if (r === undefined || r === null) return '';
  return typeof r === 'string' ? r : JSON.stringify(r);
}

export const get = (url, opts) => request('GET', url, undefined, opts);
export const put = (url, body) => request('PUT', url, body ?? {});
export const post = (url, body) => request('POST', url, body ?? {});
export const del = (url, body, opts) => request('DELETE', url, body, opts);

// login checks user/pass with /api/whoami before keeping them.
export async function login(user, pass) {
  const bytes = new TextEncoder().encode(`${user}:${pass}`);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  const resp = await fetch('/api/whoami', {
    headers: { Accept: 'application/json', Authorization: `Basic ${btoa(bin)}` },
    credentials: 'omit', cache: 'no-store',
  });
  const data = await resp.json().catch(() => null);
  if (!resp.ok) throw new APIError(resp.status, data && data.error, data && reasonText(data.reason));
  saveCredentials(user, pass);
  return data;
}
