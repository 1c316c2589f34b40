// Yella dashboard: live updates and small conveniences. Every page works
// without this script; with it, pages follow the engine's event stream
// (Server-Sent Events at <body data-events>). An element marked
// data-fragment="name" is refetched from the same URL with ?fragment=name
// and swapped in place when an event concerns it:
//   data-watch-types="run: effect:failed"  event types starting with these
//   data-watch-chain="<correlation id>"   events of that chain
//   data-watch-runs="<id> <id>"           events of those runs
//   data-min-interval="5000"              at most one refresh per 5 s
// Refreshes are batched: at most one per fragment per second. A "reset"
// frame (events were missed) or a reconnection refreshes every fragment.
(() => {
  'use strict';

  const TYPES = ['run:admitted', 'run:started', 'run:completed', 'run:failed', 'run:retry-scheduled', 'run:dead-lettered', 'run:fenced',
    'run:resumed', 'run:cancelled', 'run:retried', 'run:requeued', 'run:dropped', 'run:depth-exceeded',
    'run:waiting', 'run:signalled', 'run:wait-ended',
    'effect:completed', 'effect:failed', 'effect:replayed', 'effect:resolved', 'lease:reclaimed', 'internal:error'];
  const BASE = document.body.dataset.base || ''; // the path the dashboard is mounted under
  const MIN_INTERVAL = 1000; // ms between refreshes of one fragment
  const TICKER_MAX = 20;

  // ---- Conveniences that need no stream.

  function enhance(root) {
    root.querySelectorAll('[data-autosubmit]').forEach((el) => {
      el.addEventListener('change', () => el.form && el.form.requestSubmit());
    });
    root.querySelectorAll('form[data-confirm]').forEach((f) => {
      f.addEventListener('submit', (e) => {
        if (!window.confirm(f.dataset.confirm)) e.preventDefault();
      });
    });
    root.querySelectorAll('form[method="post"]').forEach((f) => {
      f.addEventListener('submit', (e) => {
        if (e.defaultPrevented) return;
        // After the browser has taken the form data: no double submits.
        setTimeout(() => f.querySelectorAll('button[type="submit"]').forEach((b) => { b.disabled = true; }), 0);
      });
    });
    root.querySelectorAll('textarea').forEach((t) => {
      t.addEventListener('input', () => { t.dataset.dirty = '1'; });
    });
    relTimes(root);
  }

  // The emit form checks its JSON before sending (the server checks too).
  const emitForm = document.getElementById('emit-form');
  if (emitForm) {
    emitForm.addEventListener('submit', (e) => {
      const ta = document.getElementById('emit-payload');
      const msg = document.getElementById('emit-payload-error');
      let problem = '';
      if (ta.value.trim() !== '') {
        try { JSON.parse(ta.value); } catch (err) { problem = 'Not valid JSON: ' + err.message; }
      }
      msg.textContent = problem;
      msg.hidden = problem === '';
      if (problem) {
        ta.setAttribute('aria-invalid', 'true');
        ta.focus();
        e.preventDefault();
        e.stopImmediatePropagation();
      } else {
        ta.removeAttribute('aria-invalid');
      }
    }, true);
  }

  // Relative times ("4s ago") are kept current.
  function rel(t) {
    let d = Math.round((Date.now() - t.getTime()) / 1000);
    const future = d < 0;
    d = Math.abs(d);
    if (d < 1) return 'just now';
    const two = (a, ua, b, ub) => (b ? `${a}${ua} ${b}${ub}` : `${a}${ua}`);
    let s;
    if (d < 60) s = `${d}s`;
    else if (d < 3600) s = two(Math.floor(d / 60), 'm', d % 60, 's');
    else if (d < 172800) s = two(Math.floor(d / 3600), 'h', Math.floor((d % 3600) / 60), 'm');
    else s = two(Math.floor(d / 86400), 'd', Math.floor((d % 86400) / 3600), 'h');
    return future ? `in ${s}` : `${s} ago`;
  }
  function relTimes(root) {
    root.querySelectorAll('time[data-rel]').forEach((el) => {
      const t = new Date(el.getAttribute('datetime'));
      if (!isNaN(t)) el.textContent = rel(t);
    });
  }

  enhance(document);
  setInterval(() => relTimes(document), 10000);
  // Back from the browser's cache: buttons disabled on submit work again.
  window.addEventListener('pageshow', (e) => {
    if (e.persisted) document.querySelectorAll('button[disabled]').forEach((b) => { b.disabled = false; });
  });

  // ---- Fragment refresh.

  const pending = new Set();
  const lastRefresh = new Map();
  const inFlight = new Set();
  let timer = null;
  let countsDirty = false;

  function relevant(el, ev) {
    const d = el.dataset;
    if (d.watchTypes && d.watchTypes.split(/\s+/).some((p) => p && ev.type.startsWith(p))) return true;
    if (d.watchChain && ev.correlationId && ev.correlationId === d.watchChain) return true;
    if (d.watchRuns) {
      const ids = new Set(d.watchRuns.split(/\s+/).filter(Boolean));
      if (ids.has(ev.runId) || ids.has(ev.parentId) || (ev.children || []).some((c) => ids.has(c))) return true;
    }
    return false;
  }

  // An element being edited is not replaced (the operator's input would go).
  function editing(el) {
    const a = document.activeElement;
    if (a && el.contains(a) && a.matches('input, textarea, select')) return true;
    return Array.from(el.querySelectorAll('textarea')).some((t) => t.dataset.dirty && t.value.trim() !== '');
  }

  function schedule(delay) {
    if (timer === null) timer = setTimeout(flush, delay === undefined ? 250 : delay);
  }

  function flush() {
    timer = null;
    if (document.hidden) return; // resumed by visibilitychange
    const now = Date.now();
    let wait = Infinity;
    for (const name of Array.from(pending)) {
      const el = document.querySelector(`[data-fragment="${CSS.escape(name)}"]`);
      if (!el) { pending.delete(name); continue; }
      const min = Math.max(MIN_INTERVAL, Number(el.dataset.minInterval) || 0);
      const due = (lastRefresh.get(name) || 0) + min;
      if (now < due || inFlight.has(name) || editing(el)) {
        wait = Math.min(wait, Math.max(due - now, 500));
        continue;
      }
      pending.delete(name);
      refresh(name);
    }
    if (countsDirty) refreshCounts();
    if (pending.size) schedule(wait === Infinity ? MIN_INTERVAL : wait);
  }

  async function refresh(name) {
    inFlight.add(name);
    lastRefresh.set(name, Date.now());
    try {
      const url = new URL(window.location.href);
      url.hash = '';
      url.searchParams.set('fragment', name);
      const res = await fetch(url, { credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'text/html' } });
      if (!res.ok) return;
      const html = await res.text();
      const el = document.querySelector(`[data-fragment="${CSS.escape(name)}"]`);
      if (!el || editing(el)) { pending.add(name); return; }
      const tpl = document.createElement('template');
      tpl.innerHTML = html.trim();
      const next = tpl.content.firstElementChild;
      if (!next) return;
      markFresh(el, next);
      el.replaceWith(next);
      enhance(next);
    } catch (err) {
      pending.add(name); // the server may be restarting; try again later
    } finally {
      inFlight.delete(name);
      if (pending.size) schedule(MIN_INTERVAL);
    }
  }

  // Rows that were not on the page before are highlighted.
  function markFresh(prev, next) {
    const seen = new Set(Array.from(prev.querySelectorAll('tr[data-run-id]')).map((tr) => tr.dataset.runId));
    if (seen.size === 0 && !prev.querySelector('.live-rows')) return;
    next.querySelectorAll('.live-rows tr[data-run-id]').forEach((tr) => {
      if (!seen.has(tr.dataset.runId)) tr.classList.add('fresh');
    });
  }

  async function refreshCounts() {
    countsDirty = false;
    try {
      const res = await fetch(BASE + '/ui/counts.json', { credentials: 'same-origin', cache: 'no-store' });
      if (!res.ok) return;
      const data = await res.json();
      document.querySelectorAll('[data-count]').forEach((el) => {
        const n = data.queue[el.dataset.count];
        if (n === undefined) return;
        el.textContent = n.toLocaleString('en-US');
        el.classList.toggle('zero', n === 0);
      });
    } catch (err) { /* next event will try again */ }
  }

  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && (pending.size || countsDirty)) schedule(0);
  });

  // ---- Activity ticker.

  const ticker = document.getElementById('activity');
  const queue = [];
  let tickerTimer = null;

  const LABELS = {
    'run:admitted': ['admitted', 'idle'], 'run:retry-scheduled': ['retry scheduled', 'idle'], 'run:dead-lettered': ['dead letter', 'dead-letter'],
    'run:fenced': ['fenced', 'fenced'], 'run:resumed': ['resumed', 'deferred'], 'run:cancelled': ['cancelled', 'cancelled'],
    'run:retried': ['retried', 'idle'], 'run:requeued': ['requeued', 'idle'], 'run:dropped': ['dropped', 'fenced'],
    'run:waiting': ['waiting', 'waiting'], 'run:signalled': ['signalled', 'idle'], 'run:wait-ended': ['wait ended', 'idle'],
    'run:depth-exceeded': ['too deep', 'errored'], 'effect:completed': ['effect done', 'completed'],
    'effect:failed': ['effect failed', 'errored'], 'effect:replayed': ['effect replayed', 'deferred'],
    'effect:resolved': ['effect resolved', 'completed'], 'lease:reclaimed': ['reclaimed', 'fenced'],
    'internal:error': ['internal error', 'errored'],
  };

  function label(ev) {
    if (ev.type === 'run:completed') return [ev.status === 'deferred' ? 'deferred' : 'completed', ev.status || 'completed'];
    if (ev.type === 'run:failed') return ['errored', 'errored'];
    return LABELS[ev.type];
  }

  function tick(ev) {
    if (!ticker || ev.type === 'run:started') return; // starts are too many to read
    if (ev.type === 'run:admitted' && ev.parentId) return; // follow-ups: their parent's completion says it
    // run:dead-lettered and run:fenced are followed by run:failed for the same run.
    if (ev.type === 'run:failed' && (ev.status === 'dead-letter' || ev.status === 'fenced')) return;
    if (!label(ev)) return;
    queue.push(ev);
    if (queue.length > TICKER_MAX) queue.splice(0, queue.length - TICKER_MAX);
    if (tickerTimer === null) tickerTimer = setTimeout(drawTicker, 750);
  }

  function drawTicker() {
    tickerTimer = null;
    const placeholder = ticker.querySelector('.placeholder');
    if (placeholder) placeholder.remove();
    for (const ev of queue.splice(0)) ticker.prepend(item(ev));
    while (ticker.children.length > TICKER_MAX) ticker.lastElementChild.remove();
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text) e.textContent = text;
    return e;
  }

  // An effect key as stored ("str:charge", "arr:v1:[...]") as its parts.
  function keyText(k) {
    if (k.startsWith('str:')) return k.slice(4);
    if (k.startsWith('arr:v1:')) {
      try { return JSON.parse(k.slice(7)).join(' · '); } catch (err) { /* shown as stored */ }
    }
    return k;
  }

  function item(ev) {
    const [text, status] = label(ev);
    const li = el('li', 'act');
    const at = ev.at ? new Date(ev.at) : new Date();
    const time = el('time', '', at.toLocaleTimeString([], { hour12: false }));
    time.setAttribute('datetime', at.toISOString());
    li.append(time, el('span', `badge st-${status}`, text));
    const who = ev.process || ev.event || ev.type;
    if (ev.runId) {
      const a = el('a', '', who);
      a.href = BASE + '/runs/' + encodeURIComponent(ev.runId);
      li.append(a);
    } else {
      li.append(el('span', '', who));
    }
    if (ev.effectKey) li.append(el('code', '', keyText(ev.effectKey)));
    if (ev.error) li.append(el('span', 'act-msg', ev.error));
    return li;
  }

  // ---- The stream.

  const live = document.getElementById('live');
  function setLive(state, text) {
    if (!live) return;
    live.dataset.state = state;
    live.querySelector('.live-text').textContent = text;
    live.title = state === 'on' ? 'Following the engine\'s events' : 'Live updates are not connected';
  }

  function onEvent(msg) {
    let ev;
    try { ev = JSON.parse(msg.data); } catch (err) { return; }
    if (!ev || typeof ev.type !== 'string') ev = Object.assign({}, ev, { type: msg.type });
    tick(ev);
    document.querySelectorAll('[data-fragment]').forEach((f) => {
      if (relevant(f, ev)) pending.add(f.dataset.fragment);
    });
    if (ev.type.startsWith('run:') || ev.type === 'lease:reclaimed') countsDirty = true;
    if (pending.size || countsDirty) schedule();
  }

  // Everything on the page may be stale: refetch every fragment once.
  function refreshAll() {
    document.querySelectorAll('[data-fragment]').forEach((f) => pending.add(f.dataset.fragment));
    countsDirty = true;
    schedule();
  }

  const url = document.body.dataset.events;
  let retryDelay = 2000;
  function connect() {
    if (!url || !window.EventSource) return;
    const es = new EventSource(url);
    TYPES.forEach((t) => es.addEventListener(t, onEvent));
    es.onmessage = onEvent; // frames without an event name
    es.addEventListener('reset', refreshAll); // the server could not replay what we missed
    es.onopen = () => {
      setLive('on', 'live');
      retryDelay = 2000;
      // Events may have been missed: while away, or (on the first open)
      // between the page being rendered and the stream opening.
      refreshAll();
    };
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) { // refused (e.g. 404): retry ourselves, slower each time
        setLive('off', 'offline');
        setTimeout(connect, retryDelay);
        retryDelay = Math.min(retryDelay * 2, 60000);
      } else {
        setLive('retrying', 'reconnecting');
      }
    };
  }
  connect();
})();
