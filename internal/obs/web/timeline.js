// ringtail timeline viewer: draws a Chrome trace-event file (what
// RINGTAIL_TIMELINE and `ringtail timeline merge` write) without any
// library: one lane per rank and thread, slices nested by depth, instant
// events as ticks. Loads api/timeline, or a file the user opens.
'use strict';
(() => {
  const cv = document.getElementById('tl');
  const tip = document.getElementById('tl-tip');
  const FIXED = { 'wait for peers': '#b0b0b0', 'reduce-scatter': '#3b6fb6', 'allgather': '#4c9a4c', 'compute': '#7b52ab',
    'wait for children': '#e0862d', 'exchange': '#17a2b8', 'broadcast': '#8c564b' };
  let lanes = [], t0 = 0, t1 = 1, view = [0, 1], boxes = [];

  function hue(name) {
    if (FIXED[name]) return FIXED[name];
    if (name.startsWith('step ')) return '#d9d9d6';
    let h = 0;
    for (const ch of name) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
    return `hsl(${h % 360},45%,62%)`;
  }

  function load(trace) {
    const evs = Array.isArray(trace) ? trace : trace.traceEvents || [];
    const names = {}, byLane = new Map();
    t0 = Infinity; t1 = -Infinity;
    for (const e of evs) {
      if (e.ph === 'M') {
        if (e.name === 'process_name') names['p' + e.pid] = e.args.name;
        if (e.name === 'thread_name') names['t' + e.pid + '/' + e.tid] = e.args.name;
        continue;
      }
      if (e.ph !== 'X' && e.ph !== 'i' && e.ph !== 'I') continue;
      const key = e.pid + '/' + e.tid;
      if (!byLane.has(key)) byLane.set(key, { pid: e.pid, tid: e.tid, xs: [], is: [] });
      const l = byLane.get(key);
      if (e.ph === 'X') { l.xs.push(e); t0 = Math.min(t0, e.ts); t1 = Math.max(t1, e.ts + e.dur); }
      else { l.is.push(e); t0 = Math.min(t0, e.ts); t1 = Math.max(t1, e.ts); }
    }
    lanes = [...byLane.values()].sort((a, b) => a.pid - b.pid || a.tid - b.tid);
    for (const l of lanes) {
      l.name = (names['p' + l.pid] || 'pid ' + l.pid) + ' · ' + (names['t' + l.pid + '/' + l.tid] || 'tid ' + l.tid);
      // Depth by nesting: a stack of open slices' ends.
      l.xs.sort((a, b) => a.ts - b.ts || b.dur - a.dur);
      const stack = [];
      l.depth = 1;
      for (const e of l.xs) {
        while (stack.length && stack[stack.length - 1] <= e.ts + 0.005) stack.pop(); // ends and starts rounded to ns
        e._d = stack.length;
        stack.push(e.ts + e.dur);
        l.depth = Math.max(l.depth, stack.length);
      }
    }
    if (!Number.isFinite(t0)) { t0 = 0; t1 = 1; }
    const q = new URLSearchParams(location.search);
    const from = parseFloat(q.get('from')), to = parseFloat(q.get('to')); // ms from the start
    view = Number.isFinite(from) && Number.isFinite(to) && to > from ? [t0 + from * 1e3, t0 + to * 1e3] : [t0, t1];
    document.getElementById('tl-info').textContent =
      `${evs.length} events · ${lanes.length} lanes · ${((t1 - t0) / 1e6).toFixed(2)} s`;
    draw();
  }

  const ROW = 16, LABEL = 230, AXIS = 22;
  function draw() {
    const dpr = window.devicePixelRatio || 1;
    const w = cv.clientWidth;
    let h = AXIS + 4;
    for (const l of lanes) h += l.depth * ROW + 10;
    cv.style.height = h + 'px';
    cv.width = Math.round(w * dpr); cv.height = Math.round(h * dpr);
    const g = cv.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.font = '11px system-ui, sans-serif';
    const span = view[1] - view[0], X = (t) => LABEL + ((t - view[0]) / span) * (w - LABEL - 8);
    // Time axis (ms from the trace start).
    g.fillStyle = '#6b6b70'; g.strokeStyle = '#e2e2e0';
    const step = Math.pow(10, Math.floor(Math.log10(span / 8)));
    const tick = [1, 2, 5, 10].map((m) => m * step).find((s) => span / s <= 10);
    for (let t = Math.ceil(view[0] / tick) * tick; t <= view[1]; t += tick) {
      const x = X(t);
      g.beginPath(); g.moveTo(x + 0.5, AXIS - 4); g.lineTo(x + 0.5, h); g.stroke();
      g.fillText(((t - t0) / 1e3).toFixed(tick < 1e3 ? 1 : 0) + ' ms', x + 2, AXIS - 8);
    }
    boxes = [];
    let y = AXIS + 4;
    for (const l of lanes) {
      g.fillStyle = '#1d1d1f';
      g.fillText(l.name, 4, y + 12);
      for (const e of l.xs) {
        const x0 = X(e.ts), x1 = X(e.ts + e.dur);
        if (x1 < LABEL || x0 > w) continue;
        const bx = Math.max(x0, LABEL), bw = Math.max(1, Math.min(x1, w) - bx), by = y + e._d * ROW;
        g.fillStyle = hue(e.name);
        g.fillRect(bx, by, bw, ROW - 2);
        boxes.push([bx, by, bw, ROW - 2, e]);
        if (bw > 40) {
          g.fillStyle = '#111';
          g.save(); g.beginPath(); g.rect(bx, by, bw, ROW - 2); g.clip();
          g.fillText(e.name, bx + 3, by + 11);
          g.restore();
        }
      }
      for (const e of l.is) {
        const x = X(e.ts);
        if (x < LABEL || x > w) continue;
        g.fillStyle = '#c62828';
        g.beginPath(); g.moveTo(x, y); g.lineTo(x - 4, y - 6); g.lineTo(x + 4, y - 6); g.fill();
        boxes.push([x - 4, y - 7, 8, 8, e]);
      }
      y += l.depth * ROW + 10;
      g.strokeStyle = '#e2e2e0';
      g.beginPath(); g.moveTo(0, y - 4.5); g.lineTo(w, y - 4.5); g.stroke();
    }
  }

  cv.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const r = cv.getBoundingClientRect(), w = cv.clientWidth;
    const f = Math.max(0, Math.min(1, (ev.clientX - r.left - LABEL) / (w - LABEL - 8)));
    const at = view[0] + f * (view[1] - view[0]), k = ev.deltaY > 0 ? 1.25 : 0.8;
    view = [at - (at - view[0]) * k, at + (view[1] - at) * k];
    draw();
  }, { passive: false });
  let drag = null;
  cv.addEventListener('mousedown', (ev) => { drag = { x: ev.clientX, v: view.slice() }; });
  window.addEventListener('mouseup', () => { drag = null; });
  cv.addEventListener('dblclick', () => { view = [t0, t1]; draw(); });
  cv.addEventListener('mousemove', (ev) => {
    const r = cv.getBoundingClientRect();
    if (drag) {
      const dt = ((ev.clientX - drag.x) / (cv.clientWidth - LABEL - 8)) * (drag.v[1] - drag.v[0]);
      view = [drag.v[0] - dt, drag.v[1] - dt];
      draw();
      return;
    }
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    const hit = boxes.filter(([bx, by, bw, bh]) => x >= bx && x <= bx + bw && y >= by && y <= by + bh).pop();
    if (!hit) { tip.hidden = true; return; }
    const e = hit[4];
    tip.textContent = e.name + (e.dur != null ? `\n${(e.dur / 1e3).toFixed(3)} ms` : '') +
      (e.args ? '\n' + JSON.stringify(e.args).slice(0, 300) : '');
    tip.style.left = x + 12 + 'px'; tip.style.top = y + 12 + 'px';
    tip.hidden = false;
  });
  window.addEventListener('resize', draw);
  document.getElementById('tl-file').addEventListener('change', (ev) => {
    const f = ev.target.files[0];
    if (f) f.text().then((s) => load(JSON.parse(s)));
  });
  fetch('api/timeline').then((r) => (r.ok ? r.json() : Promise.reject(new Error(r.statusText))))
    .then(load).catch(() => { document.getElementById('tl-info').textContent = 'no timeline served: open a trace file'; });
})();
