// superstep inspector: a single page over the HTTP API (pkg/api).
// Plain JavaScript, no build step; the graph layout comes from dagre
// (vendor/dagre.min.js, from npm, see ../web/package.json).
//
// Pages (hash routes, so the server serves one file):
//   #/graphs                      the graphs
//   #/graphs/NAME                 one graph: its drawing, nodes, channels; start a run
//   #/runs?graph=&status=&context_id=&page_token=   the runs, newest first
//   #/runs/ID?step=N              one run at step N (default: follow the latest)
//   #/threads                     the threads (conversations)
//   #/threads/ID?graph=NAME       one thread as a chat: messages, approvals,
//                                 the next message, history by step, fork, edit state
//   #/store                       the long-term store's namespaces
//   #/store/NS                    the items under namespace NS (a/b/c, one
//                                 hash component): browse, search, put, edit, delete
//   #/schedules                   the schedules: next and last firing, pause,
//                                 resume, delete; create one
'use strict';

(() => {
  const TOKEN_KEY = 'superstep.token';
  const POLL_MS = 1000;
  const RUN_STATUSES = ['pending', 'running', 'interrupted', 'drained', 'completed', 'failed', 'cancelled'];
  const NODE_STATUSES = ['completed', 'skipped', 'cancelled', 'failed', 'interrupted', 'running'];
  const START = '__start__';
  const END = '__end__';

  const $ = (sel) => document.querySelector(sel);

  // ---- DOM helpers: every text goes through textContent, never HTML. ----

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    append(el, children);
    return el;
  }

  function svg(tag, attrs, ...children) {
    const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
    setAttrs(el, attrs);
    append(el, children);
    return el;
  }

  function setAttrs(el, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'text') el.textContent = v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }

  function append(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
  }

  // put replaces el's children, skipping null, undefined and false.
  function put(el, ...children) {
    el.replaceChildren();
    append(el, children);
  }

  function pretty(v) {
    return v === undefined ? '(none)' : JSON.stringify(v, null, 2);
  }

  // bytes is n bytes in B, KB or MB (powers of 1,000).
  function bytes(n) {
    if (n < 1000) return n + ' B';
    if (n < 1e6) return (n / 1000).toFixed(1) + ' KB';
    return (n / 1e6).toFixed(1) + ' MB';
  }

  // storageText is a run's or thread's storage (GET …/storage) in a line.
  function storageText(s) {
    return bytes(s.total_bytes) + ' (checkpoints ' + bytes(s.checkpoint_bytes) + ', segments ' + bytes(s.segment_bytes) +
      ', events ' + bytes(s.event_bytes) + ', records ' + bytes(s.record_bytes) + ')' + (s.runs > 1 ? ' in ' + s.runs + ' runs' : '');
  }

  // storageOf reads what the run or thread at path stores; null when the
  // server does not say.
  async function storageOf(path) {
    try {
      return await api('GET', path + '/storage');
    } catch (e) {
      return null;
    }
  }

  function when(iso) {
    if (!iso) return '';
    const d = new Date(iso);
    return d.toLocaleString(undefined, { hour12: false }) + '.' + String(d.getMilliseconds()).padStart(3, '0');
  }

  // micros is an RFC 3339 time (nanoseconds and all) in microseconds since
  // the epoch; NaN when there is none.
  function micros(iso) {
    if (!iso) return NaN;
    let frac = 0;
    const whole = iso.replace(/\.(\d+)/, (_, f) => {
      frac = Number(f.padEnd(6, '0').slice(0, 6));
      return '';
    });
    return Date.parse(whole) * 1000 + frac;
  }

  // took is how long a task ran, in microseconds (NaN when unknown).
  function took(t) {
    return micros(t.finished) - micros(t.started);
  }

  // dur shows a duration given in microseconds.
  function dur(us) {
    if (!Number.isFinite(us)) return '';
    if (us < 1000) return Math.round(us) + 'µs';
    if (us < 1e6) return (us / 1000).toFixed(us < 1e4 ? 2 : 1) + 'ms';
    if (us < 6e7) return (us / 1e6).toFixed(2) + 's';
    return Math.floor(us / 6e7) + 'm' + Math.round((us % 6e7) / 1e6) + 's';
  }

  // stepSpan is how long a step's tasks took together: from the first
  // start to the last finish (NaN when unknown).
  function stepSpan(s) {
    const ts = (s.tasks || []).filter((t) => t.started && t.finished);
    if (!ts.length) return NaN;
    return Math.max(...ts.map((t) => micros(t.finished))) - Math.min(...ts.map((t) => micros(t.started)));
  }

  // usageTable shows token usage per node and for the run (the API's
  // pregel.UsageTotals); null when there is none.
  function usageTable(u, only) {
    if (!u || !u.total) return null;
    const row = (name, x, cls) => h('tr', { class: cls, 'data-usage': name }, h('td', { class: 'mono', text: name }),
      ['input_tokens', 'output_tokens', 'total_tokens'].map((k) => h('td', { class: 'num', text: String(x[k] || 0) })));
    const nodes = Object.keys(u.by_node || {}).filter((n) => !only || n === only).sort();
    if (only && !nodes.length) return null;
    return h('table', { class: 'usage' }, h('tr', {}, ['node', 'input', 'output', 'total'].map((t) => h('th', { text: t }))),
      nodes.map((n) => row(n, u.by_node[n])), only ? null : row('(run)', u.total, 'total'));
  }

  function badge(status) {
    return h('span', { class: 'badge s-' + status, 'data-status': status, text: status });
  }

  // ---- Errors shown in the page. ----

  function showError(msg) {
    const el = $('#error');
    el.textContent = msg;
    el.hidden = false;
  }

  function clearError() {
    const el = $('#error');
    el.textContent = '';
    el.hidden = true;
  }

  // ---- The API client. ----

  // ApiError carries the problem document's detail: what to fix.
  class ApiError extends Error {
    constructor(status, detail) {
      super(detail);
      this.status = status;
    }
  }

  let tokenPrompt = null; // the pending prompt, shared by concurrent requests

  // askToken opens the token dialog once and resolves when a token is given.
  function askToken(message) {
    if (tokenPrompt) return tokenPrompt;
    tokenPrompt = new Promise((resolve) => {
      const dlg = $('#token-dialog');
      $('#token-message').textContent = message;
      const input = $('#token-input');
      input.value = '';
      const done = (ev) => {
        ev.preventDefault();
        const tok = input.value.trim();
        if (!tok) return;
        sessionStorage.setItem(TOKEN_KEY, tok);
        $('#token-form').removeEventListener('submit', done);
        dlg.close();
        tokenPrompt = null;
        resolve();
      };
      $('#token-form').addEventListener('submit', done);
      dlg.addEventListener('cancel', (ev) => ev.preventDefault()); // nothing works without it
      dlg.showModal();
      input.focus();
    });
    return tokenPrompt;
  }

  // api sends one request; body is a string of JSON, sent as is. It
  // returns the decoded response or throws an ApiError. A 401 asks for
  // the token and tries again.
  async function api(method, path, body) {
    for (;;) {
      const headers = { Accept: 'application/json' };
      const tok = sessionStorage.getItem(TOKEN_KEY);
      if (tok) headers.Authorization = 'Bearer ' + tok;
      const init = { method, headers };
      if (body !== undefined) {
        headers['Content-Type'] = 'application/json';
        init.body = body;
      }
      let res;
      try {
        res = await fetch(path, init);
      } catch (e) {
        throw new ApiError(0, 'the server cannot be reached (' + e.message + '); is `superstep dev` still running?');
      }
      if (res.status === 401) {
        if (tok) sessionStorage.removeItem(TOKEN_KEY);
        await askToken(tok ? 'The server refused that token; enter the token it was started with.' : 'This server requires a bearer token (superstep dev --token).');
        continue;
      }
      const text = await res.text();
      let data = null;
      try {
        data = text ? JSON.parse(text) : null;
      } catch (_) {
        data = null;
      }
      if (!res.ok) {
        const detail = data && data.detail ? data.detail : res.status + ' ' + res.statusText;
        throw new ApiError(res.status, detail);
      }
      return data;
    }
  }

  const enc = encodeURIComponent;

  // ---- Live updates. ----

  // Feed calls refresh now and again whenever the watched thing may have
  // changed, until stopped or until refresh returns false. Given a stream
  // (a path of GET /v1/runs/{id}/stream), it reads it with fetch (which,
  // unlike an EventSource, can send the bearer token) and refreshes as the
  // run's events come (at most every STREAM_MIN_MS), polling only every
  // STREAM_POLL_MS in case; a dropped connection is opened again with the
  // Last-Event-ID of the last event read, so no event is lost or read
  // twice. onEvent, when given, receives every event of the stream (name,
  // decoded data). When the stream fails for good (a server that does not
  // stream) or has ended, it polls every POLL_MS as before.
  const STREAM_MIN_MS = 250;
  const STREAM_POLL_MS = 10000;
  const STREAM_RETRIES = 5;
  const STREAM_EVENTS = new Set(['run_started', 'node_started', 'node_finished', 'step_finished', 'run_finished', 'reset']);

  class Feed {
    constructor(refresh, stream, onEvent) {
      this.refresh = refresh;
      this.stream = stream;
      this.onEvent = onEvent;
      this.ctl = null; // aborts the stream's request while it is followed
      this.lastId = ''; // id of the last event read
      this.timer = 0;
      this.stopped = false;
      this.failed = false;
      this.busy = false; // a refresh is in flight
      this.again = false; // tick asked for while busy
      this.last = 0; // when the last refresh started
    }

    start() {
      this.listen();
      this.tick();
      return this;
    }

    // soon refreshes at the next moment STREAM_MIN_MS allows.
    soon() {
      const wait = Math.max(0, this.last + STREAM_MIN_MS - Date.now());
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.tick(), wait);
    }

    // listen follows the stream, if there is one, until it ends, fails
    // STREAM_RETRIES times in a row, or the feed stops.
    async listen() {
      if (!this.stream || this.stopped || typeof ReadableStream === 'undefined' || typeof TextDecoderStream === 'undefined') return;
      const ctl = new AbortController();
      this.ctl = ctl;
      let fails = 0;
      while (!this.stopped && this.ctl === ctl) {
        const headers = { Accept: 'text/event-stream' };
        const tok = sessionStorage.getItem(TOKEN_KEY);
        if (tok) headers.Authorization = 'Bearer ' + tok;
        if (this.lastId) headers['Last-Event-ID'] = this.lastId;
        let ended = false;
        try {
          const res = await fetch(this.stream, { headers, signal: ctl.signal, cache: 'no-store' });
          if (res.status === 401) { // ask for the token, as api does, and follow with it
            if (tok && sessionStorage.getItem(TOKEN_KEY) === tok) sessionStorage.removeItem(TOKEN_KEY);
            await askToken(tok ? 'The server refused that token; enter the token it was started with.' : 'This server requires a bearer token (superstep dev --token).');
            continue;
          }
          // 404, 501: poll instead.
          if (!res.ok || !res.body || !(res.headers.get('Content-Type') || '').startsWith('text/event-stream')) break;
          ended = await this.read(res.body, () => {
            fails = 0;
          });
        } catch (_) {
          if (ctl.signal.aborted) return;
        }
        if (ended || ++fails > STREAM_RETRIES) break;
        this.soon(); // something may have happened while disconnected
        await new Promise((ok) => setTimeout(ok, Math.min(250 * 2 ** fails, 5000)));
      }
      if (this.ctl === ctl) this.ctl = null;
      this.soon();
    }

    // read parses the server-sent events of body until it ends; it
    // reports whether the stream ended with its "end" event.
    async read(body, onMessage) {
      const reader = body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return false;
        buf += value.replace(/\r\n?/g, '\n');
        let cut;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          let name = 'message';
          let id = '';
          const data = [];
          for (const line of block.split('\n')) {
            if (!line || line[0] === ':') continue;
            const i = line.indexOf(':');
            const field = i < 0 ? line : line.slice(0, i);
            const val = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
            if (field === 'event') name = val;
            else if (field === 'id') id = val;
            else if (field === 'data') data.push(val);
          }
          if (!data.length) continue; // a comment: a heartbeat
          onMessage();
          if (id) this.lastId = id;
          if (name === 'end') {
            reader.cancel().catch(() => {});
            return true;
          }
          if (this.onEvent) {
            let parsed = null;
            try {
              parsed = JSON.parse(data.join('\n'));
            } catch (_) {
              parsed = null;
            }
            this.onEvent(name, parsed);
          }
          if (STREAM_EVENTS.has(name)) this.soon();
        }
      }
    }

    close() {
      if (this.ctl) this.ctl.abort();
      this.ctl = null;
    }

    async tick() {
      clearTimeout(this.timer);
      if (this.stopped) return;
      if (this.busy) {
        this.again = true;
        return;
      }
      this.busy = true;
      this.last = Date.now();
      let more = true;
      try {
        more = await this.refresh();
        if (this.failed) clearError(); // the server is back
        this.failed = false;
      } catch (e) {
        if (this.stopped) {
          // The page was left while this read was on its way: its
          // failure is no longer the page's to show.
          this.busy = false;
          return;
        }
        showError(e.message);
        this.failed = true;
        // A 4xx (an unknown run, say) will not mend itself; an unreachable
        // server or a 5xx may.
        more = !(e instanceof ApiError && e.status >= 400 && e.status < 500);
      }
      this.busy = false;
      if (!more && this.failed) this.close(); // a finished run's stream ends by itself
      setLive(!this.stopped && more);
      if (this.stopped || !more) return;
      if (this.again) {
        this.again = false;
        this.timer = setTimeout(() => this.tick(), STREAM_MIN_MS);
        return;
      }
      this.timer = setTimeout(() => this.tick(), this.ctl ? STREAM_POLL_MS : POLL_MS);
    }

    stop() {
      this.stopped = true;
      this.close();
      clearTimeout(this.timer);
      setLive(false);
    }
  }

  function setLive(on) {
    $('#live').hidden = !on;
  }

  // ---- Routing. ----

  let feed = null; // the current page's feed
  let page = 0; // bumped on every navigation: late answers of a page left are dropped

  function parseHash() {
    const raw = location.hash.replace(/^#/, '') || '/graphs';
    const [path, qs] = raw.split('?');
    const parts = path.split('/').filter(Boolean).map((p) => {
      try {
        return decodeURIComponent(p);
      } catch (_) {
        return p;
      }
    });
    return { raw, parts, query: new URLSearchParams(qs || '') };
  }

  async function route() {
    if (feed) feed.stop();
    feed = null;
    const my = ++page;
    clearError();
    const { raw, parts, query } = parseHash();
    for (const a of document.querySelectorAll('[data-nav]')) {
      a.classList.toggle('current', a.dataset.nav === parts[0]);
    }
    const view = $('#view');
    put(view, h('p', { class: 'muted', text: 'Loading…' }));
    try {
      if (parts[0] === 'graphs' && parts.length === 1) await graphsPage(view);
      else if (parts[0] === 'graphs' && parts.length === 2) await graphPage(view, parts[1]);
      else if (parts[0] === 'runs' && parts.length === 1) runsPage(view, query);
      else if (parts[0] === 'runs' && parts.length === 2) runPage(view, parts[1], query);
      else if (parts[0] === 'threads' && parts.length === 1) await threadsPage(view);
      else if (parts[0] === 'threads' && parts.length === 2) threadPage(view, parts[1], query);
      else if (parts[0] === 'store' && parts.length <= 2) await storePage(view, parts[1] || '', query);
      else if (parts[0] === 'schedules' && parts.length === 1) await schedulesPage(view);
      else throw new Error('there is no page at #' + raw + '; see #/graphs, #/runs, #/threads, #/store or #/schedules');
    } catch (e) {
      if (my !== page) return; // another page is shown now
      put(view, h('p', { class: 'muted', text: 'Nothing to show.' }));
      showError(e.message);
    }
  }

  function go(hash) {
    if (location.hash === hash) route();
    else location.hash = hash;
  }

  // ---- Graphs. ----

  async function graphsPage(view) {
    const my = page;
    const list = await api('GET', '/v1/graphs');
    if (my !== page) return;
    put(view,
      h('h1', { text: 'Graphs' }),
      list.graphs.length === 0 ? h('p', { class: 'muted', text: 'This server has no graphs registered.' }) : null,
      h('div', { class: 'cards' }, list.graphs.map((g) =>
        h('a', { class: 'card', href: '#/graphs/' + enc(g.name), 'data-graph': g.name },
          h('h2', { text: g.name }),
          h('div', { text: g.description || '' }),
          h('div', { class: 'muted' }, g.node_count + ' nodes · channels: ', g.channels.join(', '))))));
  }

  async function graphPage(view, name) {
    const my = page;
    const g = await api('GET', '/v1/graphs/' + enc(name));
    if (my !== page) return;
    const details = h('div', { class: 'panel', id: 'node-details' }, h('p', { class: 'muted', text: 'Click a node to see its contract.' }));
    const drawing = drawGraph(g, {}, (id) => put(details, nodeDetails(g, id, null)));
    put(view,
      h('h1', { text: g.name }),
      h('p', { text: g.description || '' }),
      h('div', { class: 'cols' },
        h('div', {},
          h('div', { class: 'panel graph-wrap' }, drawing, legend(false)),
          h('div', { class: 'panel' }, h('h2', { text: 'Nodes' }), nodeTable(g))),
        h('div', {},
          startForm(g),
          details,
          h('div', { class: 'panel' }, h('h2', { text: 'Channels' }),
            h('p', {}, g.channels.map((c) => h('span', { class: 'chip mono', text: c })))),
          h('p', {}, h('a', { href: '#/runs?graph=' + enc(g.name), text: 'Runs of ' + g.name + ' →' })))));
  }

  function nodeTable(g) {
    return h('table', {},
      h('tr', {}, ['node', 'reads', 'writes', 'attempts', 'timeout', 'on error'].map((t) => h('th', { text: t }))),
      g.nodes.map((n) => {
        const p = (g.policies || {})[n.id] || {};
        return h('tr', {},
          h('td', {}, h('b', { class: 'mono', text: n.id }), n.name ? ' ' + n.name : '',
            n.description ? h('div', { class: 'muted', text: n.description }) : null),
          h('td', { class: 'mono', text: (n.reads || []).join(', ') || 'all' }),
          h('td', { class: 'mono', text: (n.writes || []).join(', ') || 'any' }),
          h('td', { text: p.max_attempts || 1 }),
          h('td', { text: p.timeout_ms ? p.timeout_ms + ' ms' : '' }),
          h('td', { class: 'mono', text: p.on_error || '' }));
      }));
  }

  function nodeDetails(g, id, run) {
    if (id === START || id === END) return h('p', { text: id === START ? 'Start: the run input (step 0).' : 'End.' });
    const n = g.nodes.find((x) => x.id === id);
    if (!n) return h('p', { text: 'unknown node ' + id });
    const p = (g.policies || {})[id] || {};
    const meta = Object.entries(n.metadata || {});
    const out = [
      h('h2', {}, h('span', { class: 'mono', text: n.id }), n.name ? ' — ' + n.name : ''),
      n.description ? h('p', { text: n.description }) : null,
      h('dl', { class: 'kv' },
        h('dt', { text: 'reads' }), h('dd', { class: 'mono', text: (n.reads || []).join(', ') || 'the whole state' }),
        h('dt', { text: 'writes' }), h('dd', { class: 'mono', text: (n.writes || []).join(', ') || 'fields it sets' }),
        h('dt', { text: 'attempts' }), h('dd', { text: String(p.max_attempts || 1) }),
        h('dt', { text: 'timeout' }), h('dd', { text: p.timeout_ms ? p.timeout_ms + ' ms' : 'none' }),
        h('dt', { text: 'on error' }), h('dd', { class: 'mono', text: p.on_error || 'the run fails' }),
        meta.map(([k, v]) => [h('dt', { text: k }), h('dd', { class: 'mono', text: v })])),
      n.metadata && n.metadata.subgraph ? h('p', {}, 'Runs the graph ', h('a', { href: '#/graphs/' + enc(n.metadata.subgraph), text: n.metadata.subgraph }), ' as one task.') : null,
      (g.edges || []).some((e) => e.to === id && e.kind === 'fan_out') ? h('p', { class: 'muted', text: 'Runs as parallel fan-out tasks, one per item.' }) : null,
    ];
    if (run) {
      const rows = [];
      for (const s of run.steps) {
        for (const t of s.tasks || []) {
          if (t.node === id) rows.push(h('tr', {}, h('td', { text: s.step }), h('td', {}, badge(t.status)), h('td', { text: t.attempts || '' }), h('td', { class: 'num', text: dur(took(t)) }), h('td', { text: t.reason || t.error || '' })));
        }
      }
      out.push(h('h3', { text: 'Executions in this run' }),
        rows.length ? h('table', {}, h('tr', {}, ['step', 'status', 'attempts', 'took', 'reason / error'].map((t) => h('th', { text: t }))), rows)
          : h('p', { class: 'muted', text: 'None committed yet.' }));
      const u = usageTable(run.usage, id);
      if (u) out.push(h('h3', { text: 'Tokens' }), u);
    }
    return out;
  }

  // schemaFields builds one field per property of an input schema (text,
  // number, checkbox, or JSON for lists and objects); onChange receives
  // the object the fields make, or an error text.
  function schemaFields(schema, onChange) {
    const props = (schema && schema.properties) || {};
    const typeOf = (p) => [].concat(p.type || []).filter((t) => t !== 'null')[0] || '';
    const fields = Object.entries(props).map(([name, p]) => {
      const t = typeOf(p);
      let el;
      if (t === 'boolean') el = h('input', { type: 'checkbox' });
      else if (t === 'integer' || t === 'number') el = h('input', { type: 'number', step: t === 'integer' ? '1' : 'any', size: 10 });
      else if (t === 'string') el = h('input', { type: 'text', size: 30 });
      else el = h('textarea', { class: 'json-field', spellcheck: 'false', placeholder: t === 'array' ? '[ … ] (JSON)' : '{ … } (JSON)' });
      el.dataset.field = name;
      el.addEventListener('input', () => onChange(collect()));
      return { name, t, el, p };
    });
    const collect = () => {
      const out = {};
      for (const { name, t, el } of fields) {
        if (t === 'boolean') {
          if (el.checked) out[name] = true;
        } else if (el.value.trim() === '') {
          continue;
        } else if (t === 'integer' || t === 'number') {
          out[name] = Number(el.value);
        } else if (t === 'string') {
          out[name] = el.value;
        } else {
          try {
            out[name] = JSON.parse(el.value);
          } catch (e) {
            return 'the field ' + name + ' is not valid JSON (' + e.message + ')';
          }
        }
      }
      return out;
    };
    return fields.map(({ name, t, el, p }) => h('label', { class: 'field' },
      h('span', { class: 'mono', text: name }), ' ', h('span', { class: 'muted', text: (t || 'any') + (p.description ? ' — ' + p.description : '') }), el));
  }

  // startForm starts a run: plain text for graphs that take it, fields
  // generated from the graph's input schema, or the input as JSON (the
  // fields fill it in).
  function startForm(g) {
    const input = h('textarea', { id: 'start-input', spellcheck: 'false', 'aria-label': 'run input (JSON)' });
    input.value = '{}';
    const text = g.text_channel ? h('textarea', { id: 'start-text', placeholder: 'Say something…', 'aria-label': 'message (plain text)' }) : null;
    const fieldNote = h('div', { class: 'muted field-note' });
    const fields = g.input_schema ? schemaFields(g.input_schema, (v) => {
      if (typeof v === 'string') {
        fieldNote.textContent = 'Not filled in: ' + v + '.';
        return;
      }
      fieldNote.textContent = '';
      input.value = JSON.stringify(v, null, 2);
    }) : [];
    const runId = h('input', { type: 'text', id: 'start-run-id', placeholder: 'optional', size: 14 });
    const ctx = h('input', { type: 'text', id: 'start-context-id', placeholder: 'optional', size: 14 });
    const submit = async (ev) => {
      ev.preventDefault();
      clearError();
      let body;
      if (text && text.value.trim()) {
        body = '{"input":' + JSON.stringify(text.value);
      } else {
        const raw = input.value.trim() || '{}';
        let parsed;
        try {
          parsed = JSON.parse(raw);
        } catch (e) {
          showError('The input is not valid JSON: ' + e.message + '. Give a JSON object of channel values, e.g. {"' + (g.channels[0] || 'channel') + '": …}. Nothing was sent.');
          return;
        }
        if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
          showError('The input must be a JSON object of channel values (channels: ' + g.channels.join(', ') + '), not ' + (Array.isArray(parsed) ? 'an array' : typeof parsed === 'object' ? 'null' : 'a ' + typeof parsed) + '. Nothing was sent.');
          return;
        }
        body = '{"input":' + raw; // the input exactly as typed
      }
      if (runId.value.trim()) body += ',"run_id":' + JSON.stringify(runId.value.trim());
      if (ctx.value.trim()) body += ',"context_id":' + JSON.stringify(ctx.value.trim());
      body += '}';
      try {
        const run = await api('POST', '/v1/graphs/' + enc(g.name) + '/runs', body);
        go('#/runs/' + enc(run.run_id));
      } catch (e) {
        showError('The run was not started: ' + e.message);
      }
    };
    return h('form', { class: 'panel', id: 'start-form', onsubmit: submit },
      h('h2', { text: 'Start a run' }),
      text ? [h('label', { for: 'start-text', text: 'Message (plain text; it becomes the first user message)' }), text,
        h('p', { class: 'muted' }, 'Or hold a conversation on a thread: ', h('a', { href: '#/threads', text: 'Threads →' }))] : null,
      fields.length ? h('details', { class: 'fields', open: !text }, h('summary', { text: 'Input fields (from the graph\'s input schema)' }), fields, fieldNote) : null,
      h('label', { for: 'start-input', text: 'Input as JSON: an object of channel values (' + g.channels.join(', ') + ')' + (fields.length ? '; the fields fill it in' : '') }),
      input,
      h('div', { class: 'row' },
        h('label', {}, 'run id ', runId), h('label', {}, 'thread (context id) ', ctx),
        h('button', { type: 'submit', id: 'start-run', text: 'Start run' })));
  }

  // ---- The graph drawing. ----

  // drawGraph lays g out with dagre and draws it as SVG. state maps a node
  // id to {status, current, next, title}; onClick receives a node id.
  function drawGraph(g, state, onClick, selected) {
    if (typeof dagre === 'undefined') throw new Error('the graph layout library did not load; reload the page');
    const d = new dagre.graphlib.Graph({ multigraph: true });
    d.setGraph({ rankdir: 'TB', nodesep: 28, ranksep: 42, edgesep: 14, marginx: 12, marginy: 12 });
    d.setDefaultEdgeLabel(() => ({}));
    const label = (n) => n.name || n.id;
    const nodes = [{ id: START, label: 'start', terminal: true }, ...g.nodes.map((n) => ({ id: n.id, label: label(n), sub: n.name && n.name !== n.id ? n.id : '', info: n })), { id: END, label: 'end', terminal: true }];
    for (const n of nodes) {
      const w = Math.max(n.terminal ? 64 : 96, 8 * Math.max(n.label.length, (n.sub || '').length * 0.85) + 28);
      d.setNode(n.id, { width: w, height: n.terminal ? 30 : (n.sub ? 46 : 36) });
    }
    const labels = { fan_out: 'fan-out', join: 'join', on_error: 'on error' };
    (g.edges || []).forEach((e, i) => {
      if (e.from === e.to) return; // a loop onto itself is drawn by hand below
      const text = labels[e.kind];
      d.setEdge(e.from, e.to, text ? { label: text, width: text.length * 6 + 6, height: 14, labelpos: 'c' } : {}, e.kind + i);
    });
    dagre.layout(d);
    const gi = d.graph();
    const loops = (g.edges || []).some((e) => e.from === e.to) ? 40 : 0; // room for drawn self-loops
    const width = Math.ceil(gi.width) + loops;
    const root = svg('svg', { class: 'graph', width, height: Math.ceil(gi.height), viewBox: '0 0 ' + width + ' ' + Math.ceil(gi.height), role: 'img', 'aria-label': 'graph ' + g.name },
      svg('defs', {}, svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' }, svg('path', { d: 'M0,0 L10,5 L0,10 z' }))));
    (g.edges || []).forEach((e, i) => {
      if (e.from === e.to) {
        const b = d.node(e.from);
        const x = b.x + b.width / 2;
        root.append(svg('g', { class: 'edge ' + e.kind, 'data-from': e.from, 'data-to': e.to },
          svg('path', { d: 'M' + x + ',' + (b.y - 7) + ' C' + (x + 34) + ',' + (b.y - 26) + ' ' + (x + 34) + ',' + (b.y + 26) + ' ' + (x + 2) + ',' + (b.y + 7), 'marker-end': 'url(#arrow)' })));
        return;
      }
      const ed = d.edge({ v: e.from, w: e.to, name: e.kind + i });
      if (!ed) return;
      const pts = ed.points;
      let path = 'M' + pts[0].x + ',' + pts[0].y;
      for (let k = 1; k < pts.length; k++) path += ' L' + pts[k].x + ',' + pts[k].y;
      root.append(svg('g', { class: 'edge ' + e.kind, 'data-from': e.from, 'data-to': e.to },
        svg('path', { d: path, 'marker-end': 'url(#arrow)' }),
        ed.label ? svg('text', { x: ed.x, y: ed.y, text: ed.label }) : null));
    });
    for (const n of nodes) {
      const box = d.node(n.id);
      const st = state[n.id] || {};
      const cls = ['node', n.terminal ? 'terminal' : '', n.info && n.info.metadata && n.info.metadata.subgraph ? 'subgraph' : '',
        st.status || '', st.current ? 'current' : '', st.next ? 'next' : '', selected === n.id ? 'selected' : ''].filter(Boolean).join(' ');
      const el = svg('g', { class: cls, 'data-node': n.id, 'data-status': st.status || '', transform: 'translate(' + (box.x - box.width / 2) + ',' + (box.y - box.height / 2) + ')', onclick: () => onClick(n.id) },
        svg('title', { text: n.id + (st.title ? ': ' + st.title : '') }),
        svg('rect', { width: box.width, height: box.height, rx: n.terminal ? 15 : 6 }),
        svg('text', { x: box.width / 2, y: n.sub ? 15 : box.height / 2, text: n.label }),
        n.sub ? svg('text', { class: 'sub', x: box.width / 2, y: 33, text: n.sub }) : null);
      root.append(el);
    }
    return root;
  }

  function legend(withStatus) {
    if (!withStatus) {
      return h('div', { class: 'legend muted' }, 'solid: edge · dashed: conditional · purple: fan-out · blue: join · red dotted: on error');
    }
    return h('div', { class: 'legend' }, NODE_STATUSES.map((s) => h('span', { class: 'chip s-' + s, text: s })),
      h('span', { class: 'muted', text: '· thick border: ran in this step · dashed orange: runs next' }));
  }

  // ---- Runs. ----

  function runsPage(view, query) {
    const filters = {
      graph: query.get('graph') || '',
      status: query.get('status') || '',
      context_id: query.get('context_id') || '',
    };
    const token = query.get('page_token') || '';
    const graphSel = h('select', { id: 'filter-graph', 'aria-label': 'graph' }, h('option', { value: '', text: 'any graph' }));
    const statusSel = h('select', { id: 'filter-status', 'aria-label': 'status' }, h('option', { value: '', text: 'any status' }),
      RUN_STATUSES.map((s) => h('option', { value: s, text: s, selected: s === filters.status })));
    const ctxIn = h('input', { type: 'text', id: 'filter-context', placeholder: 'thread (context id)', value: filters.context_id });
    const apply = (ev) => {
      ev.preventDefault();
      const q = new URLSearchParams();
      if (graphSel.value) q.set('graph', graphSel.value);
      if (statusSel.value) q.set('status', statusSel.value);
      if (ctxIn.value.trim()) q.set('context_id', ctxIn.value.trim());
      go('#/runs' + (q.toString() ? '?' + q : ''));
    };
    const body = h('tbody', {});
    const pager = h('div', { class: 'row' });
    const my = page;
    api('GET', '/v1/graphs').then((list) => {
      if (my !== page) return;
      for (const g of list.graphs) graphSel.append(h('option', { value: g.name, text: g.name, selected: g.name === filters.graph }));
    }).catch((e) => showError(e.message));
    put(view,
      h('h1', { text: 'Runs' }),
      h('form', { class: 'inline panel', onsubmit: apply }, graphSel, statusSel, ctxIn, h('button', { type: 'submit', text: 'Filter' })),
      h('div', { class: 'panel' },
        h('table', { id: 'runs' }, h('thead', {}, h('tr', {}, ['run', 'graph', 'status', 'step', 'nodes', 'thread', 'created', 'updated'].map((t) => h('th', { text: t })))), body),
        pager));
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(filters)) if (v) q.set(k, v);
    if (token) q.set('page_token', token);
    q.set('limit', '25');
    const refresh = async () => {
      const list = await api('GET', '/v1/runs?' + q);
      if (my !== page) return false;
      put(body, ...list.runs.map((r) => h('tr', { class: 'clickable', 'data-run': r.run_id, onclick: () => go('#/runs/' + enc(r.run_id)) },
        h('td', {}, h('a', { class: 'mono', href: '#/runs/' + enc(r.run_id), text: r.run_id })),
        h('td', { text: r.graph }), h('td', {}, badge(r.status)), h('td', { text: r.step }),
        h('td', {}, counterChips(r.counters)), h('td', { class: 'mono', text: r.context_id || '' }),
        h('td', { text: when(r.created_at) }), h('td', { text: when(r.updated_at) }))));
      if (list.runs.length === 0) body.append(h('tr', {}, h('td', { colspan: 8, class: 'muted', text: 'No runs match.' })));
      const base = new URLSearchParams(q);
      base.delete('limit');
      base.delete('page_token');
      put(pager,
        token ? h('a', { href: '#/runs' + (base.toString() ? '?' + base : ''), id: 'first-page', text: '← first page' }) : null,
        list.next_page_token ? h('a', { href: '#/runs?' + new URLSearchParams([...base, ['page_token', list.next_page_token]]), id: 'next-page', text: 'next page →' }) : null);
      return true;
    };
    feed = new Feed(refresh).start();
  }

  function counterChips(c) {
    if (!c) return null;
    return ['completed', 'skipped', 'cancelled', 'failed'].filter((k) => c[k]).map((k) => h('span', { class: 'chip s-' + k, title: k, text: k + ' ' + c[k] }));
  }

  // ---- One run. ----

  // statusesAt gives each node its status as of committed step `step`:
  // the latest status of its tasks up to that step (the most telling one
  // when fan-out ran several), the nodes of that step marked current and
  // those the next step runs marked next. At the latest step, the run's
  // live state is laid over: running, interrupted, failed.
  function statusesAt(run, step) {
    const rank = { skipped: 1, completed: 2, running: 3, cancelled: 4, interrupted: 5, failed: 6 };
    const out = {};
    const s = (id) => (out[id] = out[id] || {});
    let at = null;
    for (const info of run.steps) {
      if (info.step > step) break;
      at = info;
      const inStep = {};
      for (const t of info.tasks || []) {
        const cur = inStep[t.node];
        if (!cur || rank[t.status] > rank[cur.status]) inStep[t.node] = t;
      }
      for (const [id, t] of Object.entries(inStep)) {
        Object.assign(s(id), { status: t.status, title: t.status + (t.reason ? ' (' + t.reason + ')' : '') + (t.error ? ': ' + t.error : ''), current: info.step === step });
      }
    }
    for (const id of Object.keys(out)) if (out[id].current && at && at.step !== step) out[id].current = false;
    const latest = run.steps.length ? run.steps[run.steps.length - 1].step : 0;
    if (at && (step < latest || run.status === 'pending' || run.status === 'running' || run.status === 'drained')) {
      for (const id of at.next || []) s(id).next = true;
    }
    if (step === latest) {
      if (run.status === 'running' && at) for (const id of at.next || []) Object.assign(s(id), { status: 'running', title: 'running', next: false });
      if (run.status === 'interrupted') for (const it of run.interrupts || []) Object.assign(s(it.node), { status: 'interrupted', title: 'waiting for an answer', next: false });
      if (run.status === 'failed' && run.failed_node) Object.assign(s(run.failed_node), { status: 'failed', title: run.error || 'failed', next: false });
    }
    return out;
  }

  function runPage(view, id, query) {
    const my = page;
    const ui = {
      header: h('div', { id: 'run-header' }),
      controls: h('div', { id: 'run-controls', class: 'panel' }),
      stepper: h('div', { class: 'stepper' }),
      graph: h('div', { class: 'graph-wrap', id: 'run-graph' }),
      details: h('div', { class: 'panel', id: 'node-details' }, h('p', { class: 'muted', text: 'Click a node to see its executions in this run.' })),
      timeline: h('div', { id: 'timeline' }),
      state: h('div', { id: 'state' }),
      events: h('div', { id: 'events' }),
      usage: h('div', { id: 'usage' }),
      output: h('div', { id: 'stream-output' }),
    };
    ui.usagePanel = h('div', { class: 'panel', hidden: true }, h('h2', { text: 'Token usage' }), ui.usage);
    ui.outputPanel = h('div', { class: 'panel', hidden: true }, h('h2', { text: 'Model output' }), ui.output);
    const st = {
      graph: null,
      run: null,
      events: null,
      step: query.has('step') ? Number(query.get('step')) : null, // null: follow the latest
      selected: null,
      controlsKey: '',
      shownKey: '',
      checkpoints: new Map(), // committed steps never change
      window: [], // the newest steps, as the run's view lists them
      older: [], // older steps loaded from /checkpoints, oldest first
      olderToken: null, // the token of the next older page, once one is loaded
      output: new Map(), // task id -> the text it streamed
      lastEventId: 0, // of the last stream event handled
    };
    const stream = '/v1/runs/' + enc(id) + '/stream?mode=events';
    let loaded = false;

    const latestStep = () => (st.run.steps.length ? st.run.steps[st.run.steps.length - 1].step : 0);
    const oldestStep = () => (st.run.steps.length ? st.run.steps[0].step : 0);
    const shownStep = () => (st.step === null ? latestStep() : Math.max(oldestStep(), Math.min(st.step, latestStep())));

    // The run's view lists its newest steps; older ones are loaded a page
    // at a time (newest first) from /checkpoints?order=desc. st.run.steps
    // is the loaded older steps, then the view's, oldest first.
    const mergeSteps = () => {
      const win = st.window;
      const first = win.length ? win[0].step : Infinity;
      let older = st.older.filter((s) => s.step < first);
      if (older.length && win.length && older[older.length - 1].step + 1 < first) {
        // The run went on past the loaded steps: start again from its view.
        st.older = older = [];
        st.olderToken = null;
      }
      st.run.steps = older.concat(win);
      st.run.older_token = st.older.length ? st.olderToken : st.run.older_steps_page_token || null;
    };

    const loadOlder = async () => {
      const tok = st.run.older_token;
      if (!tok || st.loadingOlder) return;
      st.loadingOlder = true;
      try {
        const list = await api('GET', '/v1/runs/' + enc(id) + '/checkpoints?order=desc&limit=100&page_token=' + encodeURIComponent(tok));
        if (my !== page) return;
        const got = list.checkpoints.slice().reverse();
        const first = st.run.steps.length ? st.run.steps[0].step : Infinity;
        st.older = got.filter((s) => s.step < first).concat(st.older);
        st.olderToken = list.next_page_token || null;
        mergeSteps();
        render();
      } catch (e) {
        showError('Loading older steps failed: ' + e.message);
      } finally {
        st.loadingOlder = false;
      }
    };

    const checkpoint = async (n) => {
      if (!st.checkpoints.has(n)) st.checkpoints.set(n, await api('GET', '/v1/runs/' + enc(id) + '/checkpoints/' + n));
      return st.checkpoints.get(n);
    };

    const selectStep = (n) => {
      st.step = n >= latestStep() && !isFinal(st.run.status) ? null : n;
      const q = st.step === null ? '' : '?step=' + n;
      history.replaceState(null, '', '#/runs/' + enc(id) + q);
      render();
    };

    const action = async (label, method, path, body) => {
      clearError();
      try {
        await api(method, path, body);
      } catch (e) {
        showError(label + ' failed: ' + e.message);
        return;
      }
      st.controlsKey = '';
      if (feed) feed.stop();
      feed = new Feed(refresh, stream, onStreamEvent).start();
    };

    const renderControls = () => {
      const r = st.run;
      const key = [r.status, r.drain_requested, r.cancel_requested, (r.interrupts || []).map((i) => i.id + ':' + (i.error || '')).join(',')].join('|');
      if (key === st.controlsKey) return;
      st.controlsKey = key;
      const live = r.status === 'pending' || r.status === 'running';
      const reason = h('input', { type: 'text', id: 'drain-reason', placeholder: 'reason (optional)', size: 22 });
      const parts = [h('h2', { text: 'Controls' })];
      if (r.status === 'interrupted') {
        const answer = (body) => action('Answering the interrupt', 'POST', '/v1/runs/' + enc(id) + '/resume', body);
        for (const it of r.interrupts || []) {
          if (isApproval(it.value)) parts.push(approvalCard(it, (value) => answer(resumeBody(r, it.id, value))));
        }
        parts.push(interruptForm(r, answer));
      }
      parts.push(h('form', { class: 'inline', onsubmit: (ev) => {
        ev.preventDefault();
        action('Drain', 'POST', '/v1/runs/' + enc(id) + '/drain', JSON.stringify(reason.value.trim() ? { reason: reason.value.trim() } : {}));
      } }, reason, h('button', { type: 'submit', id: 'drain', class: 'secondary', disabled: !live || r.drain_requested, title: 'stop at the next superstep boundary', text: live && r.drain_requested ? 'Drain requested' : 'Drain' }),
      h('button', { type: 'button', id: 'cancel', class: 'danger', disabled: isFinal(r.status) || r.cancel_requested, text: r.cancel_requested ? 'Cancel requested' : 'Cancel',
        onclick: () => action('Cancel', 'POST', '/v1/runs/' + enc(id) + '/cancel', '{}') }),
      r.status === 'drained' ? h('button', { type: 'button', id: 'resume', text: 'Resume', onclick: () => action('Resume', 'POST', '/v1/runs/' + enc(id) + '/resume', '{}') }) : null));
      put(ui.controls, ...parts);
    };

    const renderHeader = () => {
      const r = st.run;
      put(ui.header,
        h('h1', {}, 'Run ', h('span', { class: 'mono', id: 'run-id', text: r.run_id }), ' ', h('span', { id: 'run-status' }, badge(r.status))),
        h('dl', { class: 'kv' },
          h('dt', { text: 'graph' }), h('dd', {}, h('a', { href: '#/graphs/' + enc(r.graph), text: r.graph })),
          h('dt', { text: 'step' }), h('dd', { text: String(r.step) }),
          r.graph_version ? [h('dt', { text: 'version' }), h('dd', { class: 'mono', id: 'graph-version', text: (r.graph_version.version ? r.graph_version.version + ' ' : '') + r.graph_version.fingerprint })] : null,
          h('dt', { text: 'nodes' }), h('dd', {}, counterChips(r.counters)),
          r.context_id ? [h('dt', { text: 'thread' }), h('dd', {}, h('a', { class: 'mono', href: '#/runs?context_id=' + enc(r.context_id), text: r.context_id }))] : null,
          h('dt', { text: 'created' }), h('dd', { text: when(r.created_at) }),
          h('dt', { text: 'updated' }), h('dd', { text: when(r.updated_at) }),
          st.storage ? [h('dt', { text: 'stored' }), h('dd', { id: 'run-storage', title: 'what the run stores: checkpoints, segments, events, record', text: storageText(st.storage) })] : null,
          r.drain_requested ? [h('dt', { text: 'drain' }), h('dd', { id: 'drain-info', text: 'requested' + (r.drain_reason ? ': ' + r.drain_reason : '') })] : null,
          r.cancel_requested ? [h('dt', { text: 'cancel' }), h('dd', { text: 'requested' })] : null,
          r.error ? [h('dt', { text: 'error' }), h('dd', { class: 'diff-removed', id: 'run-error', text: (r.failed_node ? r.failed_node + ': ' : '') + r.error })] : null),
        h('details', {}, h('summary', { text: 'input' }), h('pre', { text: pretty(r.input) })));
    };

    const renderStepper = () => {
      const last = latestStep();
      const cur = shownStep();
      const range = h('input', { type: 'range', id: 'step-range', min: oldestStep(), max: last, value: cur, 'aria-label': 'step',
        onchange: (ev) => selectStep(Number(ev.target.value)) });
      put(ui.stepper,
        h('button', { type: 'button', class: 'secondary', id: 'step-prev', disabled: cur <= oldestStep(), text: '◀', onclick: () => selectStep(cur - 1) }),
        range,
        h('button', { type: 'button', class: 'secondary', id: 'step-next', disabled: cur >= last, text: '▶', onclick: () => selectStep(cur + 1) }),
        h('span', { id: 'step-label' }, 'step ' + cur + ' of ' + last, st.step === null && !isFinal(st.run.status) ? ' (following)' : ''));
    };

    const renderGraph = () => {
      const states = statusesAt(st.run, shownStep());
      const select = (nid) => {
        st.selected = nid;
        render();
      };
      put(ui.graph, drawGraph(st.graph, states, select, st.selected));
      if (st.selected) put(ui.details, ...[nodeDetails(st.graph, st.selected, st.run)].flat());
    };

    const renderTimeline = () => {
      const cur = shownStep();
      const r = st.run;
      // Each task's bar is as long as its share of the longest task.
      let longest = 0;
      for (const s of r.steps) for (const t of s.tasks || []) if (took(t) > longest) longest = took(t);
      const bar = (t) => {
        const el = h('span', { class: 'bar' });
        el.style.width = (longest > 0 && took(t) > 0 ? Math.max(2, Math.round((48 * took(t)) / longest)) : 0) + 'px';
        return el;
      };
      const rows = r.steps.map((s) => h('tr', { class: 'clickable' + (s.step === cur ? ' selected' : ''), 'data-step': s.step, onclick: () => selectStep(s.step) },
        h('td', { text: s.step === 0 ? '0 (input)' : s.step }),
        h('td', {}, (s.tasks || []).map((t) => h('span', { class: 'chip s-' + t.status, 'data-node': t.node, 'data-took-us': Number.isFinite(took(t)) ? Math.round(took(t)) : null,
          title: t.task_id + (t.started ? ' ran ' + when(t.started) + ' → ' + when(t.finished) : '') + (t.error ? ': ' + t.error : '') },
        t.node + ' ' + t.status + (t.attempts > 1 ? ' ×' + t.attempts : '') + (Number.isFinite(took(t)) ? ' ' + dur(took(t)) : '') + (t.reason || t.error ? ' — ' + (t.reason || t.error) : ''),
        Number.isFinite(took(t)) ? bar(t) : null))),
        h('td', { class: 'num step-took', text: dur(stepSpan(s)) }),
        h('td', { class: 'mono', text: (s.changed || []).join(', ') }),
        h('td', { class: 'mono', text: (s.next || []).join(', ') })));
      if (!isFinal(r.status) && r.steps.length) {
        const next = r.steps[r.steps.length - 1].next || [];
        if (next.length) {
          const what = r.status === 'running' ? 'running' : r.status === 'interrupted' ? 'waiting' : r.status;
          rows.push(h('tr', { class: 'muted' }, h('td', { text: (latestStep() + 1) + ' (' + what + ')' }),
            h('td', {}, next.map((n) => h('span', { class: 'chip s-' + (r.status === 'interrupted' && (r.interrupts || []).some((i) => i.node === n) ? 'interrupted' : r.status === 'running' ? 'running' : 'pending'), text: n }))),
            h('td', {}), h('td', {}), h('td', {})));
        }
      }
      // A long run's older steps: how many are not loaded, and a button
      // to load the page before the oldest shown.
      const notLoaded = r.steps.length ? r.steps[0].step : 0;
      const more = r.older_token && notLoaded > 0 ? h('p', { id: 'older-steps', class: 'muted' },
        notLoaded + ' older step' + (notLoaded === 1 ? '' : 's') + ' of ' + r.step_count + ' not loaded. ',
        h('button', { type: 'button', class: 'secondary', id: 'load-older', text: 'Load ' + Math.min(100, notLoaded) + ' older', onclick: loadOlder })) : null;
      put(ui.timeline, more,
        h('table', {}, h('tr', {}, ['step', 'tasks (status, attempts, time, reason)', 'took', 'changed', 'next'].map((t) => h('th', { text: t }))), rows));
    };

    const renderUsage = () => {
      const t = usageTable(st.run.usage);
      ui.usagePanel.hidden = !t;
      put(ui.usage, t);
    };

    // The text model nodes stream, per task, as it comes.
    const onStreamEvent = (name, ev) => {
      if (!ev || typeof ev.id !== 'number' || ev.id <= st.lastEventId) return; // replayed to a new feed
      st.lastEventId = ev.id;
      if (name !== 'custom' || (ev.name !== 'message_delta' && ev.name !== 'token') || !ev.payload || typeof ev.payload.text !== 'string') return;
      let o = st.output.get(ev.task_id);
      if (!o) {
        o = { node: ev.node, step: ev.step, text: h('span', { class: 'text' }) };
        st.output.set(ev.task_id, o);
        ui.output.append(h('div', { class: 'stream-item', 'data-node': ev.node }, h('b', { class: 'mono', text: ev.node }), h('span', { class: 'muted', text: ' step ' + ev.step + ': ' }), o.text));
        ui.outputPanel.hidden = false;
      }
      o.text.append(ev.payload.text);
    };

    const renderState = async () => {
      if (!st.run.steps.length) {
        st.shownKey = '';
        put(ui.state, h('p', { class: 'muted', text: 'No step committed yet.' }));
        return;
      }
      const n = shownStep();
      const key = n + '|' + latestStep();
      if (key === st.shownKey) return;
      st.shownKey = key;
      const cp = await checkpoint(n);
      const prev = n > 0 ? await checkpoint(n - 1) : null;
      if (my !== page || shownStep() !== n) return;
      const now = cp.values || {};
      const before = prev ? prev.values || {} : {};
      const names = [...new Set([...Object.keys(before), ...Object.keys(now)])].sort();
      const rows = [];
      for (const c of names) {
        const a = JSON.stringify(before[c]);
        const b = JSON.stringify(now[c]);
        if (a === b) continue;
        let kind = !(c in before) ? 'added' : !(c in now) ? 'removed' : 'changed';
        let was = c in before ? pretty(before[c]) : '—';
        let is = c in now ? pretty(now[c]) : '—';
        const x = before[c];
        const y = now[c];
        if (Array.isArray(x) && Array.isArray(y) && y.length > x.length && JSON.stringify(y.slice(0, x.length)) === a) {
          kind = 'appended'; // an append reducer: show what was added
          was = x.length + ' item' + (x.length === 1 ? '' : 's');
          is = '+ ' + pretty(y.slice(x.length));
        }
        rows.push(h('tr', { 'data-channel': c }, h('td', { class: 'mono diff-' + (kind === 'appended' ? 'added' : kind), text: c + ' (' + kind + ')' }),
          h('td', {}, h('pre', { text: was })),
          h('td', {}, h('pre', { text: is }))));
      }
      put(ui.state,
        h('h3', { text: n === 0 ? 'Step 0: the input' : 'Diff from step ' + (n - 1) + ' to step ' + n }),
        rows.length ? h('table', { class: 'diff', id: 'diff' }, h('tr', {}, h('th', { text: 'channel' }), h('th', { text: 'before' }), h('th', { text: 'after' })), rows)
          : h('p', { class: 'muted', text: 'No channel changed.' }),
        h('h3', { text: 'State after step ' + n }),
        h('pre', { id: 'state-json', text: pretty(now) }),
        cp.drain_request ? h('p', { text: 'A node asked the run to drain: ' + cp.drain_request }) : null,
        cp.barriers && Object.keys(cp.barriers).length ? h('p', { class: 'muted' }, 'Joins waiting: ', Object.entries(cp.barriers).map(([k, v]) => k.replace(/^\d+:/, '') + ' has ' + v.join(', ')).join('; ')) : null);
    };

    const renderEvents = () => {
      const ev = st.events;
      put(ui.events,
        ev.events_dropped ? h('p', { class: 'muted', text: ev.events_dropped + ' older events were dropped.' }) : null,
        h('table', { id: 'event-table' }, h('tr', {}, ['at', 'event', 'status', 'step', 'detail'].map((t) => h('th', { text: t }))),
          ev.events.map((e) => h('tr', { 'data-event': e.type }, h('td', { text: when(e.at) }), h('td', { text: e.type }), h('td', {}, badge(e.status)), h('td', { text: e.step }), h('td', { class: 'mono', text: e.detail || '' })))));
    };

    const render = () => {
      if (my !== page || !st.run) return;
      renderHeader();
      renderControls();
      renderStepper();
      renderGraph();
      renderTimeline();
      renderUsage();
      renderEvents();
      renderState().catch((e) => showError(e.message));
    };

    const refresh = async () => {
      const [run, events] = await Promise.all([api('GET', '/v1/runs/' + enc(id)), api('GET', '/v1/runs/' + enc(id) + '/events')]);
      if (!st.graph || st.graph.name !== run.graph) st.graph = await api('GET', '/v1/graphs/' + enc(run.graph));
      if (my !== page) return false;
      if (!loaded) {
        loaded = true;
        put(view, ui.header, ui.controls,
          h('div', { class: 'cols' },
            h('div', {},
              h('div', { class: 'panel' }, h('h2', { text: 'Graph at step' }), ui.stepper, ui.graph, legend(true)),
              h('div', { class: 'panel' }, h('h2', { text: 'Supersteps' }), ui.timeline)),
            h('div', {},
              ui.details,
              ui.outputPanel,
              ui.usagePanel,
              h('div', { class: 'panel' }, h('h2', { text: 'State' }), ui.state),
              h('div', { class: 'panel' }, h('h2', { text: 'Events' }), ui.events))));
      }
      const changed = !st.run || st.run.updated_at !== run.updated_at || st.run.step_count !== run.step_count || !st.events || st.events.events.length !== events.events.length;
      // What the run stores: read again when its status changes (a read
      // of all its rows, not paid on every poll).
      if (!st.run || st.run.status !== run.status) st.storage = await storageOf('/v1/runs/' + enc(id));
      st.run = run;
      st.window = run.steps;
      mergeSteps();
      st.events = events;
      if (changed) render();
      return !isFinal(run.status);
    };

    feed = new Feed(async () => {
      try {
        return await refresh();
      } catch (e) {
        if (!loaded) put(view, h('p', { class: 'muted', text: 'Nothing to show.' }));
        throw e;
      }
    }, stream, onStreamEvent).start();
  }

  function isFinal(status) {
    return status === 'completed' || status === 'failed' || status === 'cancelled';
  }

  // payloadView shows what an interrupt asks: an object as a list of its
  // fields, texts with their line breaks; anything else as JSON.
  function payloadView(v) {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return h('pre', { class: 'interrupt-payload', text: pretty(v) });
    return h('dl', { class: 'kv interrupt-payload' }, Object.entries(v).map(([k, x]) => [
      h('dt', { text: k }),
      h('dd', {}, typeof x === 'string' ? h('div', { class: 'text', text: x }) : h('pre', { text: pretty(x) })),
    ]));
  }

  // interruptForm shows each pending interrupt's payload and takes the
  // answer, typed as text (sent as a JSON string) or as JSON.
  function interruptForm(run, send) {
    const ins = run.interrupts || [];
    const fields = ins.map((it) => {
      const answer = h('textarea', { class: 'answer', 'data-interrupt': it.id, spellcheck: 'false', placeholder: 'your answer', 'aria-label': 'answer to ' + it.node });
      const mode = h('select', { class: 'answer-type', 'aria-label': 'answer type' }, h('option', { value: 'json', text: 'JSON' }), h('option', { value: 'text', text: 'text' }));
      return { it, answer, mode };
    });
    const submit = (ev) => {
      ev.preventDefault();
      clearError();
      const values = {};
      for (const { it, answer, mode } of fields) {
        const raw = answer.value.trim();
        if (mode.value === 'text') {
          values[it.id] = JSON.stringify(answer.value);
          continue;
        }
        if (!raw) {
          showError('The answer to ' + it.node + ' is empty; type a JSON value, or choose "text". Nothing was sent.');
          return;
        }
        try {
          JSON.parse(raw);
        } catch (e) {
          showError('The answer to ' + it.node + ' is not valid JSON (' + e.message + '). Quote text ("approve"), or choose "text" as its type. Nothing was sent.');
          return;
        }
        values[it.id] = raw;
      }
      const body = ins.length === 1 ? '{"resume":' + values[ins[0].id] + '}'
        : '{"resume_by_id":{' + ins.map((it) => JSON.stringify(it.id) + ':' + values[it.id]).join(',') + '}}';
      send(body);
    };
    return h('form', { id: 'interrupt-form', onsubmit: submit },
      fields.map(({ it, answer, mode }) => h('div', { class: 'interrupt' },
        h('div', {}, h('b', { text: it.node }), ' asks ', h('span', { class: 'muted mono', text: '(' + it.id + ')' })),
        payloadView(it.value),
        it.error && !isApproval(it.value) ? h('div', { class: 'refused', role: 'status' }, h('b', { text: 'Your last answer was refused: ' }), refusal(it.error)) : null,
        h('div', { class: 'row' }, h('label', {}, 'answer as ', mode)),
        answer)),
      h('button', { type: 'submit', id: 'answer', text: 'Answer and resume' }));
  }

  // ---- Agents: approvals, threads and the chat view. ----

  // checkSchema checks v against a JSON Schema (the subset tools' schemas
  // use: type, properties, required, additionalProperties, items, enum,
  // minimum, maximum) and returns what does not fit, one text each.
  function checkSchema(schema, v, path) {
    const at = path || 'the arguments';
    if (!schema || typeof schema !== 'object') return [];
    const kind = (x) => (x === null ? 'null' : Array.isArray(x) ? 'array' : Number.isInteger(x) ? 'integer' : typeof x);
    const types = schema.type === undefined ? [] : [].concat(schema.type);
    if (types.length && !types.some((t) => t === kind(v) || (t === 'number' && kind(v) === 'integer'))) {
      return [at + ' must be ' + types.join(' or ') + ', not ' + kind(v)];
    }
    const errs = [];
    if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(v))) errs.push(at + ' must be one of ' + schema.enum.map((e) => JSON.stringify(e)).join(', '));
    if (typeof v === 'number') {
      if (typeof schema.minimum === 'number' && v < schema.minimum) errs.push(at + ' must be at least ' + schema.minimum);
      if (typeof schema.maximum === 'number' && v > schema.maximum) errs.push(at + ' must be at most ' + schema.maximum);
    }
    if (kind(v) === 'object') {
      const props = schema.properties || {};
      for (const r of schema.required || []) if (!(r in v)) errs.push(at + ' lack "' + r + '"');
      for (const [k, x] of Object.entries(v)) {
        if (props[k]) errs.push(...checkSchema(props[k], x, '"' + k + '"'));
        else if (schema.additionalProperties === false) errs.push('"' + k + '" is not an argument of this tool (it takes ' + Object.keys(props).join(', ') + ')');
      }
    }
    if (kind(v) === 'array' && schema.items) v.forEach((x, i) => errs.push(...checkSchema(schema.items, x, at + '[' + i + ']')));
    return errs;
  }

  // refusal is why an answer was refused (an interrupt's error), without
  // the engine's own "the answer was refused: " in front.
  function refusal(err) {
    return String(err).replace(/^the answer was refused: /, '');
  }

  // isApproval tells an agent's tool approval request (pkg/agent).
  function isApproval(v) {
    return v && typeof v === 'object' && v.kind === 'tool_approval' && v.tool_call && typeof v.tool_call.name === 'string';
  }

  // approvalCard shows a tool call waiting for approval with its three
  // answers; answer receives the decision as JSON text.
  function approvalCard(it, answer) {
    const call = it.value.tool_call;
    const reason = h('input', { type: 'text', class: 'reject-reason', placeholder: 'why (told to the model)', size: 30, 'aria-label': 'reason to reject' });
    const edit = h('textarea', { class: 'edit-args', spellcheck: 'false', 'aria-label': 'arguments to call ' + call.name + ' with' });
    edit.value = pretty(call.input === undefined ? {} : call.input);
    const editForm = h('div', { class: 'edit-box', hidden: true },
      h('label', { text: 'Arguments (checked against the tool\'s schema before sending)' }), edit,
      h('div', { class: 'row' }, h('button', { type: 'button', class: 'send-edit', text: 'Send edited arguments', onclick: () => {
        clearError();
        let input;
        try {
          input = JSON.parse(edit.value);
        } catch (e) {
          showError('The edited arguments are not valid JSON (' + e.message + '). Nothing was sent.');
          return;
        }
        const errs = checkSchema(it.value.input_schema || { type: 'object' }, input);
        if (errs.length) {
          showError('The edited arguments do not fit the tool ' + call.name + ': ' + errs.join('; ') + '. Nothing was sent.');
          return;
        }
        answer(JSON.stringify({ decision: 'edit', input }));
      } })));
    return h('div', { class: 'approval', 'data-interrupt': it.id },
      h('div', {}, h('b', { text: it.node }), ' asks to approve a call of ', h('b', { class: 'mono', text: call.name })),
      h('pre', { class: 'tool-args', text: pretty(call.input === undefined ? {} : call.input) }),
      it.error ? h('div', { class: 'refused', role: 'status' }, h('b', { text: 'Your last answer was refused: ' }), refusal(it.error)) : null,
      h('div', { class: 'row' },
        h('button', { type: 'button', class: 'approve', text: 'Approve', onclick: () => answer('{"decision":"approve"}') }),
        reason,
        h('button', { type: 'button', class: 'reject danger', text: 'Reject', onclick: () => answer(JSON.stringify(reason.value.trim() ? { decision: 'reject', message: reason.value.trim() } : { decision: 'reject' })) }),
        h('button', { type: 'button', class: 'edit secondary', text: 'Edit…', onclick: () => {
          editForm.hidden = !editForm.hidden;
        } })),
      editForm);
  }

  // resumeBody is the body of a resume request answering interrupt id
  // of run with value (JSON text).
  function resumeBody(run, id, value) {
    return (run.interrupts || []).length <= 1 ? '{"resume":' + value + '}' : '{"resume_by_id":{' + JSON.stringify(id) + ':' + value + '}}';
  }

  // blockText is the text of a message's text blocks.
  function blockText(m) {
    return (m.content || []).filter((b) => typeof b.text === 'string').map((b) => b.text).join('\n');
  }

  // conversationView shows messages: the user's and the assistant's text
  // as bubbles, each tool call folded with its result.
  function conversationView(msgs) {
    const results = new Map();
    for (const m of msgs) for (const b of m.content || []) if (b.tool_result) results.set(b.tool_result.tool_call_id, b.tool_result);
    const out = [];
    for (const m of msgs) {
      if ((m.content || []).every((b) => b.tool_result)) continue; // shown with their calls
      const text = blockText(m);
      const calls = (m.content || []).filter((b) => b.tool_call).map((b) => b.tool_call);
      const kids = [];
      if (text) kids.push(h('div', { class: 'text', text }));
      for (const c of calls) {
        const r = results.get(c.id);
        kids.push(h('details', { class: 'tool-call', 'data-tool': c.name },
          h('summary', {}, h('span', { class: 'mono', text: c.name }), ' ', h('span', { class: 'muted mono', text: JSON.stringify(c.input === undefined ? {} : c.input) }), ' ',
            r ? (r.error ? h('span', { class: 'badge s-failed', text: 'error' }) : h('span', { class: 'badge s-completed', text: r.edited_input ? 'done (edited)' : 'done' })) : h('span', { class: 'badge', text: 'no result' })),
          r && r.edited_input ? h('div', {}, 'ran with edited arguments ', h('span', { class: 'mono', text: JSON.stringify(r.edited_input) })) : null,
          h('pre', { text: r ? r.content : 'no result yet' })));
      }
      if (kids.length) out.push(h('div', { class: 'msg ' + (m.role || 'user'), 'data-role': m.role }, h('div', { class: 'who', text: m.role }), kids));
    }
    return out.length ? out : [h('p', { class: 'muted', text: 'No messages yet: send the first one below.' })];
  }

  async function threadsPage(view) {
    const my = page;
    const [list, graphs] = await Promise.all([api('GET', '/v1/threads?limit=100'), api('GET', '/v1/graphs')]);
    if (my !== page) return;
    const id = h('input', { type: 'text', id: 'new-thread-id', placeholder: 'optional', size: 16 });
    const create = async (ev) => {
      ev.preventDefault();
      clearError();
      try {
        const t = await api('POST', '/v1/threads', JSON.stringify(id.value.trim() ? { thread_id: id.value.trim() } : {}));
        go('#/threads/' + enc(t.thread_id));
      } catch (e) {
        showError('The thread was not created: ' + e.message);
      }
    };
    const agents = graphs.graphs.filter((g) => g.text_channel).map((g) => g.name);
    put(view,
      h('h1', { text: 'Threads' }),
      h('p', { class: 'muted', text: 'A thread is a conversation: each run on it starts from its latest state.' + (agents.length ? ' Graphs that chat: ' + agents.join(', ') + '.' : '') }),
      h('form', { class: 'panel inline', id: 'new-thread', onsubmit: create }, h('label', {}, 'New thread, id ', id), h('button', { type: 'submit', id: 'create-thread', text: 'Create thread' })),
      list.threads.length === 0 ? h('p', { class: 'muted', text: 'No threads yet.' }) :
        h('table', { id: 'threads' },
          h('tr', {}, ['thread', 'status', 'updated', 'forked from', 'active run'].map((t) => h('th', { text: t }))),
          list.threads.map((t) => h('tr', { class: 'clickable', 'data-thread': t.thread_id, onclick: () => go('#/threads/' + enc(t.thread_id)) },
            h('td', {}, h('a', { class: 'mono', href: '#/threads/' + enc(t.thread_id), text: t.thread_id })),
            h('td', {}, badge(t.status || 'idle')),
            h('td', { text: when(t.updated_at) }),
            h('td', { class: 'mono', text: t.forked_from || '' }),
            h('td', { class: 'mono', text: t.active_run_id || '' })))));
  }

  // ---- Schedules (/v1/schedules). ----

  // schedulesPage lists the schedules, each with its next and last firing
  // (a link to the last run) and buttons to pause, resume and delete, and
  // a form that creates one; the API's refusal is shown as it says it.
  async function schedulesPage(view) {
    const my = page;
    const [list, graphs] = await Promise.all([api('GET', '/v1/schedules'), api('GET', '/v1/graphs')]);
    if (my !== page) return;
    const fName = h('input', { type: 'text', id: 'sched-name', placeholder: 'nightly-report', size: 24 });
    const fGraph = h('select', { id: 'sched-graph' }, graphs.graphs.map((g) => h('option', { value: g.name, text: g.name })));
    const fExpr = h('input', { type: 'text', id: 'sched-expr', placeholder: '0 9 * * MON-FRI, rate(5 minutes), cron(0 2 * * ? *)', size: 36 });
    const fTZ = h('input', { type: 'text', id: 'sched-tz', placeholder: 'UTC', size: 20 });
    const fInput = h('textarea', { id: 'sched-input', class: 'json-field', placeholder: '{"channel": "value"} (optional)' });
    const act = async (what, method, path) => {
      clearError();
      try {
        await api(method, path);
        route();
      } catch (e) {
        showError('The schedule was not ' + what + ': ' + e.message);
      }
    };
    const create = async (ev) => {
      ev.preventDefault();
      clearError();
      const body = { name: fName.value.trim(), graph: fGraph.value, schedule: fExpr.value.trim() };
      if (fTZ.value.trim()) body.timezone = fTZ.value.trim();
      if (fInput.value.trim()) {
        try {
          body.input = JSON.parse(fInput.value);
        } catch (e) {
          showError('The input is not JSON: ' + e.message);
          return;
        }
      }
      try {
        await api('POST', '/v1/schedules', JSON.stringify(body));
        route();
      } catch (e) {
        showError('The schedule was not created: ' + e.message);
      }
    };
    const path = (s) => '/v1/schedules/' + enc(s.name);
    put(view,
      h('h1', { text: 'Schedules' }),
      h('p', { class: 'muted', text: 'Each firing starts a run of the graph with the schedule\u2019s input; its run id is sched.NAME.TIME, so a firing delivered twice starts one run.' }),
      list.schedules.length === 0 ? h('p', { class: 'muted', id: 'no-schedules', text: 'No schedules.' }) :
        h('table', { id: 'schedules' },
          h('tr', {}, ['name', 'graph', 'schedule', 'timezone', 'state', 'next firing', 'last firing', ''].map((t) => h('th', { text: t }))),
          list.schedules.map((s) => h('tr', { 'data-schedule': s.name, 'data-paused': String(s.paused) },
            h('td', { class: 'mono', title: s.description || '', text: s.name }),
            h('td', {}, h('a', { href: '#/graphs/' + enc(s.graph), text: s.graph })),
            h('td', { class: 'mono', text: s.schedule }),
            h('td', { text: s.timezone }),
            h('td', { class: 'state', text: s.paused ? 'paused' : 'active' }),
            h('td', { class: 'next', text: s.next_fire_at ? when(s.next_fire_at) : '' }),
            h('td', { class: 'last' },
              s.last_fire_at ? when(s.last_fire_at) + ' ' : '',
              s.last_run_id ? h('a', { class: 'mono last-run', href: '#/runs/' + enc(s.last_run_id), text: s.last_run_id }) : null,
              s.last_error ? h('div', { class: 'error-text', text: s.last_error }) : null,
              s.missed ? h('div', { class: 'muted', text: s.missed + ' missed' }) : null),
            h('td', {},
              s.paused ? h('button', { type: 'button', class: 'resume-schedule', onclick: () => act('resumed', 'POST', path(s) + '/resume'), text: 'Resume' }) :
                h('button', { type: 'button', class: 'pause-schedule', onclick: () => act('paused', 'POST', path(s) + '/pause'), text: 'Pause' }),
              ' ',
              h('button', { type: 'button', class: 'danger delete-schedule', onclick: () => act('deleted', 'DELETE', path(s)), text: 'Delete' }))))),
      h('form', { class: 'panel edit-box', id: 'schedule-form', onsubmit: create },
        h('h3', { text: 'Create a schedule' }),
        h('label', { class: 'field' }, 'Name', fName),
        h('label', { class: 'field' }, 'Graph', fGraph),
        h('label', { class: 'field' }, 'Schedule (cron, rate() or at())', fExpr),
        h('label', { class: 'field' }, 'Time zone (IANA, default UTC)', fTZ),
        h('label', { class: 'field' }, 'Input (a JSON object, optional)', fInput),
        h('button', { type: 'submit', id: 'create-schedule', text: 'Create' })));
  }

  // ---- The long-term store (/v1/store). ----

  // storePage lists the namespaces (ns empty) or the items under ns, with
  // a search box (by meaning, when the server has an embedding model) and
  // a form that puts an item (new, or one of the list to edit).
  async function storePage(view, ns, query) {
    const my = page;
    const q = query.get('q') || '';
    const nsPath = (s) => '#/store/' + enc(s);
    const [names, found] = await Promise.all([
      api('GET', '/v1/store/namespaces' + (ns ? '?prefix=' + enc(ns) : '')),
      ns ? api('POST', '/v1/store/items/search', JSON.stringify(q ? { namespace_prefix: ns.split('/'), query: q } : { namespace_prefix: ns.split('/'), limit: 200 })) : null,
    ]);
    if (my !== page) return;
    const goNS = h('input', { type: 'text', id: 'store-ns', value: ns, placeholder: 'users/u-42', size: 28 });
    const search = h('input', { type: 'text', id: 'store-query', value: q, placeholder: 'what to look for', size: 28 });
    const fNS = h('input', { type: 'text', id: 'item-ns', value: ns, placeholder: 'users/u-42/prefs', size: 28 });
    const fKey = h('input', { type: 'text', id: 'item-key', placeholder: 'key', size: 20 });
    const fValue = h('textarea', { id: 'item-value', class: 'json-field', placeholder: '{"text": "…"}' });
    const fTTL = h('input', { type: 'number', id: 'item-ttl', min: '0', placeholder: 'seconds', size: 8 });
    const putItem = async (ev) => {
      ev.preventDefault();
      clearError();
      let value;
      try {
        value = JSON.parse(fValue.value);
      } catch (e) {
        showError('The value is not JSON: ' + e.message);
        return;
      }
      const body = { namespace: fNS.value.trim().split('/').filter(Boolean), key: fKey.value, value };
      if (fTTL.value) body.ttl_seconds = Number(fTTL.value);
      try {
        await api('PUT', '/v1/store/items', JSON.stringify(body));
        go(nsPath(ns || body.namespace.join('/')));
      } catch (e) {
        showError('The item was not stored: ' + e.message);
      }
    };
    const edit = (it) => {
      fNS.value = it.namespace.join('/');
      fKey.value = it.key;
      fValue.value = JSON.stringify(it.value, null, 2);
      fTTL.value = '';
      fValue.focus();
    };
    const del = async (it) => {
      clearError();
      try {
        await api('DELETE', '/v1/store/items?namespace=' + enc(it.namespace.join('/')) + '&key=' + enc(it.key));
        route();
      } catch (e) {
        showError('The item was not deleted: ' + e.message);
      }
    };
    const items = found ? found.items : [];
    put(view,
      h('h1', { text: ns ? 'Store: ' + ns : 'Store' }),
      h('p', { class: 'muted', text: 'The long-term store keeps JSON items (agents\u2019 memories) under namespaces; they outlive threads and runs.' }),
      h('form', { class: 'panel inline', id: 'store-go', onsubmit: (ev) => { ev.preventDefault(); go(goNS.value.trim() ? nsPath(goNS.value.trim().replace(/^\/+|\/+$/g, '')) : '#/store'); } },
        h('label', {}, 'Namespace ', goNS), h('button', { type: 'submit', text: 'Open' })),
      names.namespaces.length === 0 ? h('p', { class: 'muted', text: ns ? 'No items under ' + ns + '.' : 'The store is empty.' }) :
        h('div', { class: 'panel' }, h('h3', { text: 'Namespaces' + (ns ? ' under ' + ns : '') }),
          h('ul', { id: 'store-namespaces' }, names.namespaces.map((n) => h('li', {}, h('a', { class: 'mono', href: nsPath(n.join('/')), 'data-ns': n.join('/'), text: n.join('/') }))))),
      ns ? h('form', { class: 'panel inline', id: 'store-search', onsubmit: (ev) => { ev.preventDefault(); go(nsPath(ns) + (search.value.trim() ? '?q=' + enc(search.value.trim()) : '')); } },
        h('label', {}, 'Search by meaning ', search), h('button', { type: 'submit', text: 'Search' })) : null,
      ns ? (items.length === 0 ? h('p', { class: 'muted', text: q ? 'Nothing found.' : 'No items.' }) :
        h('table', { id: 'store-items' },
          h('tr', {}, ['namespace', 'key', 'value', 'updated', 'expires', q ? 'score' : '', ''].map((t) => h('th', { text: t }))),
          items.map((it) => h('tr', { 'data-key': it.key, 'data-ns': it.namespace.join('/') },
            h('td', { class: 'mono', text: it.namespace.join('/') }),
            h('td', { class: 'mono', text: it.key }),
            h('td', {}, h('pre', { text: pretty(it.value) })),
            h('td', { text: when(it.updated_at) }),
            h('td', { text: it.expires_at ? when(it.expires_at) : '' }),
            h('td', { class: 'num', text: it.score != null ? it.score.toFixed(3) : '' }),
            h('td', {}, h('button', { type: 'button', class: 'edit-item', onclick: () => edit(it), text: 'Edit' }), ' ',
              h('button', { type: 'button', class: 'danger delete-item', onclick: () => del(it), text: 'Delete' })))))) : null,
      found && found.next_page_token ? h('p', { class: 'muted', text: 'More items than shown: narrow the namespace.' }) : null,
      h('form', { class: 'panel edit-box', id: 'item-form', onsubmit: putItem },
        h('h3', { text: 'Put an item' }),
        h('label', { class: 'field' }, 'Namespace', fNS),
        h('label', { class: 'field' }, 'Key', fKey),
        h('label', { class: 'field' }, 'Value (a JSON object)', fValue),
        h('label', { class: 'field' }, 'Expires after (seconds, optional)', fTTL),
        h('button', { type: 'submit', id: 'put-item', text: 'Put' })));
  }

  // threadPage is the chat view of a thread: its conversation, the
  // approvals its run waits on, a box sending the next message, its
  // history by step (fork from a step) and a form editing its state.
  function threadPage(view, id, query) {
    const my = page;
    const base = '/v1/threads/' + enc(id);
    const ui = {
      header: h('div', { id: 'thread-header' }),
      chat: h('div', { id: 'chat', class: 'chat' }),
      live: h('div', { id: 'chat-live', class: 'msg assistant streaming', hidden: true }),
      waiting: h('div', { id: 'approvals' }),
      usage: h('div', { id: 'thread-usage', class: 'muted' }),
      history: h('div', { id: 'thread-history' }),
      runs: h('div', { id: 'thread-runs' }),
    };
    const st = { thread: null, graphs: null, graph: null, run: null, key: '', histKey: '', streamFor: '', lastEventId: 0, sending: false };
    let sub = null; // the feed following the active run's stream

    const graphSel = h('select', { id: 'chat-graph', 'aria-label': 'graph' });
    const strategy = h('select', { id: 'chat-strategy', 'aria-label': 'when the thread is busy' },
      [['reject', 'refuse while busy'], ['enqueue', 'queue after the active run'], ['interrupt', 'interrupt the active run'], ['rollback', 'roll back the active run']].map(([v, t]) => h('option', { value: v, text: v + ': ' + t })));
    const box = h('textarea', { id: 'chat-input', placeholder: 'Message…', 'aria-label': 'message' });
    const send = async (ev) => {
      ev.preventDefault();
      clearError();
      const text = box.value.trim();
      if (!text) {
        showError('The message is empty: type something to send. Nothing was sent.');
        return;
      }
      if (!graphSel.value) {
        showError('Choose the graph to run on this thread. Nothing was sent.');
        return;
      }
      try {
        await api('POST', base + '/runs', JSON.stringify({ graph: graphSel.value, input: text, strategy: strategy.value }));
        box.value = '';
      } catch (e) {
        showError('The message was not sent: ' + e.message);
        return;
      }
      st.key = '';
      feed.soon();
    };
    const sendForm = h('form', { id: 'chat-send', class: 'panel', onsubmit: send },
      box, h('div', { class: 'row' }, h('label', {}, 'graph ', graphSel), h('label', {}, 'if busy ', strategy), h('button', { type: 'submit', id: 'chat-submit', text: 'Send' })));

    const asNode = h('select', { id: 'edit-as-node', 'aria-label': 'as node' });
    const values = h('textarea', { id: 'edit-values', spellcheck: 'false', 'aria-label': 'values (JSON)' });
    const editState = async (ev) => {
      ev.preventDefault();
      clearError();
      let parsed;
      try {
        parsed = JSON.parse(values.value);
      } catch (e) {
        showError('The values are not valid JSON (' + e.message + '). Nothing was sent.');
        return;
      }
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
        showError('The values must be a JSON object of channel values. Nothing was sent.');
        return;
      }
      try {
        await api('POST', base + '/state', JSON.stringify({ graph: graphSel.value, as_node: asNode.value, values: parsed }));
      } catch (e) {
        showError('The state was not updated: ' + e.message);
        return;
      }
      st.key = '';
      st.histKey = '';
      feed.soon();
    };
    const editForm = h('form', { id: 'edit-state', class: 'panel', onsubmit: editState },
      h('h2', { text: 'Edit state' }),
      h('p', { class: 'muted', text: 'Writes these values through the channels\' reducers as the node would have; the next run starts from them. Messages: a list, appended (an id replaces that message).' }),
      h('label', {}, 'as node ', asNode), values,
      h('button', { type: 'submit', id: 'edit-submit', text: 'Update state' }));

    const fork = async (runId, step) => {
      clearError();
      try {
        const t = await api('POST', base + '/fork', JSON.stringify({ run_id: runId, step }));
        go('#/threads/' + enc(t.thread_id));
      } catch (e) {
        showError('The fork failed: ' + e.message);
      }
    };

    const follow = (runId) => {
      if (st.streamFor === runId) return;
      if (sub) sub.stop();
      st.streamFor = runId;
      put(ui.live);
      ui.live.hidden = true;
      if (!runId) return;
      const text = h('div', { class: 'text' });
      sub = new Feed(async () => true, '/v1/runs/' + enc(runId) + '/stream?mode=events', (name, ev) => {
        if (!ev || typeof ev.id !== 'number' || ev.id <= st.lastEventId) return;
        st.lastEventId = ev.id;
        if (name === 'custom' && (ev.name === 'message_delta' || ev.name === 'token') && ev.payload && typeof ev.payload.text === 'string') {
          if (ui.live.hidden) put(ui.live, h('div', { class: 'who', text: 'assistant (streaming)' }), text);
          ui.live.hidden = false;
          text.append(ev.payload.text);
        }
        feed.soon();
      });
      sub.tick = async () => {}; // only the stream: the page's feed refreshes
      sub.listen();
    };

    const render = () => {
      const t = st.thread;
      const s = st.state;
      const r = st.run;
      const msgs = (s && s.values && Array.isArray(s.values.messages)) ? s.values.messages : [];
      const key = JSON.stringify([t.status, t.active_run_id, s && s.run_id, s && s.step, r && r.status, r && r.interrupts, msgs.length]);
      if (key === st.key) return;
      st.key = key;
      put(ui.header,
        h('h1', {}, 'Thread ', h('span', { class: 'mono', id: 'thread-id', text: t.thread_id }), ' ', h('span', { id: 'thread-status' }, badge(t.status || 'idle'))),
        h('p', { class: 'muted' },
          t.forked_from ? ['forked from ', h('a', { class: 'mono', href: '#/threads/' + enc(t.forked_from), text: t.forked_from }), '. '] : null,
          (t.forks || []).length ? ['forks: ', t.forks.map((f) => [h('a', { class: 'mono', href: '#/threads/' + enc(f), text: f }), ' '])] : null,
          h('a', { href: '#/runs?context_id=' + enc(t.thread_id), text: 'its runs in the run list →' })),
        st.storage ? h('p', { class: 'muted', id: 'thread-storage', title: 'what the thread and its runs store', text: 'Stored: ' + storageText(st.storage) }) : null);
      if (msgs.length || !s || !s.values) put(ui.chat, conversationView(msgs));
      else put(ui.chat, h('pre', { class: 'mono', text: pretty(s.values) }));
      const usage = s && s.values && s.values.usage && s.values.usage.total;
      put(ui.usage, usage ? 'Tokens (the thread\'s usage): ' + (usage.input_tokens || 0) + ' in, ' + (usage.output_tokens || 0) + ' out, ' + (usage.total_tokens || 0) + ' total' : '');
      const parts = [];
      if (r && r.status === 'interrupted') {
        const answer = (it) => (value) => act(r, it, value);
        for (const it of r.interrupts || []) {
          if (isApproval(it.value)) parts.push(approvalCard(it, answer(it)));
        }
        parts.push(h('details', { class: 'other-answer' }, h('summary', { text: 'Answer as JSON or text…' }),
          interruptForm(r, (body) => resumeWith(r, body))));
      }
      put(ui.waiting, parts);
      if (r && (r.status === 'pending' || r.status === 'running')) follow(r.run_id);
      else if (st.streamFor) follow(''); // the run stopped: its text is in the messages now
    };

    const resumeWith = async (r, body) => {
      clearError();
      try {
        await api('POST', '/v1/runs/' + enc(r.run_id) + '/resume', body);
      } catch (e) {
        showError('The answer was not sent: ' + e.message);
        return;
      }
      st.key = '';
      feed.soon();
    };
    const act = (r, it, value) => resumeWith(r, resumeBody(r, it.id, value));

    const renderHistory = (hist) => {
      const key = JSON.stringify(hist.steps.map((x) => [x.run_id, x.step]));
      if (key === st.histKey) return;
      st.histKey = key;
      put(ui.history, hist.steps.length === 0 ? h('p', { class: 'muted', text: 'No steps yet.' }) :
        h('table', {}, h('tr', {}, ['run', 'step', 'nodes', 'changed', ''].map((x) => h('th', { text: x }))),
          hist.steps.map((x) => h('tr', { 'data-step': x.step, 'data-run': x.run_id },
            h('td', {}, h('a', { class: 'mono', href: '#/runs/' + enc(x.run_id) + '?step=' + x.step, text: x.run_id.slice(0, 10) })),
            h('td', { class: 'num', text: x.step }),
            h('td', {}, (x.tasks || []).map((tk) => h('span', { class: 'chip mono', title: tk.status, text: tk.node }))),
            h('td', { class: 'mono', text: (x.changed || []).join(', ') }),
            h('td', {}, h('button', { type: 'button', class: 'fork secondary', text: 'Fork from here', onclick: () => fork(x.run_id, x.step) }))))));
    };

    const refresh = async () => {
      const [t, state, hist, runsList] = await Promise.all([
        api('GET', base), api('GET', base + '/state'), api('GET', base + '/history?limit=50'), api('GET', base + '/runs?limit=10')]);
      if (my !== page) return false;
      if (!st.graphs) {
        st.graphs = (await api('GET', '/v1/graphs')).graphs;
        const last = runsList.runs[0];
        const chosen = query.get('graph') || (last && last.graph) || (st.graphs.find((g) => g.text_channel) || st.graphs[0] || {}).name;
        put(graphSel, st.graphs.map((g) => h('option', { value: g.name, selected: g.name === chosen, text: g.name })));
        graphSel.onchange = loadGraph;
        await loadGraph();
      }
      const skey = JSON.stringify([t.status, state.run_id, state.step]);
      if (skey !== st.storageKey) {
        st.storageKey = skey;
        st.storage = await storageOf(base);
      }
      st.thread = t;
      st.state = state;
      const active = t.active_run_id || (runsList.runs[0] && runsList.runs[0].run_id);
      st.run = active ? await api('GET', '/v1/runs/' + enc(active)) : null;
      if (my !== page) return false;
      render();
      renderHistory(hist);
      put(ui.runs, runsList.runs.map((x) => h('div', {}, h('a', { class: 'mono', href: '#/runs/' + enc(x.run_id), text: x.run_id }), ' ', badge(x.status))));
      return true;
    };
    const loadGraph = async () => {
      st.graph = await api('GET', '/v1/graphs/' + enc(graphSel.value));
      put(asNode, st.graph.nodes.map((n) => h('option', { value: n.id, text: n.id })));
      if (!values.value) values.value = st.graph.text_channel ? '{"' + st.graph.text_channel + '": [{"role": "assistant", "content": [{"text": "…"}]}]}' : '{}';
    };

    put(view, ui.header,
      h('div', { class: 'cols' },
        h('div', {}, h('div', { class: 'panel' }, ui.chat, ui.live, ui.usage), ui.waiting, sendForm),
        h('div', {},
          h('div', { class: 'panel' }, h('h2', { text: 'History by step' }), h('p', { class: 'muted', text: 'Newest first. A fork is a new thread whose next run starts from that step.' }), ui.history),
          editForm,
          h('div', { class: 'panel' }, h('h2', { text: 'Runs' }), ui.runs))));
    feed = new Feed(refresh, null).start();
    const stopAll = feed.stop.bind(feed);
    feed.stop = () => {
      stopAll();
      if (sub) sub.stop();
    };
  }

  window.addEventListener('hashchange', route);
  window.addEventListener('DOMContentLoaded', route);
})();
