// ringtail dashboard: follows /api/events (Server-Sent Events relayed from
// every rank) and draws the job. No libraries: canvas and the DOM.
'use strict';
(() => {
  const S = {
    world: 0,
    ranks: new Map(),   // rank -> {info, stats: [], last}
    steps: new Map(),   // step -> {step, ev (lowest rank's event), own: Map(rank -> event)}
    targets: new Map(), // index -> {target, state}
    maxStep: -1,
    progress: new Map(), // rank -> [progress points], in the order reported
  };
  const MAX_PROGRESS = 20000;
  const MAX_STEPS = 5000, MAX_STATS = 900;
  const PALETTE = ['#3b6fb6', '#e0862d', '#4c9a4c', '#c62828', '#7b52ab', '#8c564b', '#d45fa7', '#7f7f7f', '#b5b51f', '#17a2b8'];
  const HEAT = [[255, 255, 204], [254, 217, 118], [253, 141, 60], [227, 26, 28], [128, 0, 38]];
  const $ = (id) => document.getElementById(id);
  const color = (r) => PALETTE[r % PALETTE.length];

  function rank(r) {
    let x = S.ranks.get(r);
    if (!x) { x = { info: null, stats: [], last: null }; S.ranks.set(r, x); }
    return x;
  }

  function onMessage(m) {
    switch (m.kind) {
      case 'job':
        $('title').textContent = m.title || 'ringtail';
        document.title = (m.title || 'ringtail') + ' — dashboard';
        break;
      case 'target':
        S.targets.set(m.index, m);
        break;
      case 'info':
        rank(m.rank).info = m;
        S.world = Math.max(S.world, m.world);
        break;
      case 'stats': {
        const r = rank(m.rank);
        if (r.last && m.t_ms <= r.last.t_ms) break; // replayed after a reconnect
        r.stats.push(m);
        if (r.stats.length > MAX_STATS) r.stats.splice(0, r.stats.length - MAX_STATS);
        r.last = m;
        break;
      }
      case 'progress': {
        let pts = S.progress.get(m.rank);
        if (!pts) { pts = []; S.progress.set(m.rank, pts); }
        if (pts.length && m.t_ms <= pts[pts.length - 1].t_ms) break; // replayed after a reconnect
        pts.push(m);
        if (pts.length > MAX_PROGRESS) pts.splice(0, pts.length - MAX_PROGRESS);
        break;
      }
      case 'step': {
        S.world = Math.max(S.world, (m.arrivals_ms || []).length);
        let s = S.steps.get(m.step);
        if (!s) {
          s = { step: m.step, ev: m, own: new Map() };
          S.steps.set(m.step, s);
          if (S.steps.size > MAX_STEPS) S.steps.delete(Math.min(...S.steps.keys()));
        } else if (m.rank < s.ev.rank) {
          s.ev = m;
        }
        s.own.set(m.rank, m);
        S.maxStep = Math.max(S.maxStep, m.step);
        break;
      }
    }
    schedule();
  }

  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; draw(); });
  }

  // sortedSteps returns the recorded steps, ascending (the last n if given).
  function sortedSteps(n) {
    const all = [...S.steps.values()].sort((a, b) => a.step - b.step);
    return n ? all.slice(-n) : all;
  }

  function median(xs) {
    const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
    if (!v.length) return NaN;
    const h = v.length >> 1;
    return v.length % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
  }

  // stragglers marks a rank that the controller predicts to straggle or
  // evicted in the last 10 steps, or whose per-sample compute time or
  // arrival is over 1.5× the median rank's.
  function stragglers() {
    const out = new Map();
    const add = (r, why) => { if (!out.has(r)) out.set(r, new Set()); out.get(r).add(why); };
    const recent = sortedSteps(10);
    if (!recent.length) return out;
    const last = recent[recent.length - 1].ev;
    for (const r of last.next.stragglers || []) add(r, 'predicted straggler');
    for (const s of recent) for (const r of s.ev.plan.evicted || []) add(r, 'evicted');
    const n = S.world;
    const mean = (pick) => {
      const sum = new Array(n).fill(0), cnt = new Array(n).fill(0);
      for (const s of recent) {
        for (let r = 0; r < n; r++) {
          const v = pick(s.ev, r);
          if (Number.isFinite(v) && v > 0) { sum[r] += v; cnt[r]++; }
        }
      }
      return sum.map((v, r) => (cnt[r] ? v / cnt[r] : NaN));
    };
    const perSample = mean((ev, r) => {
      const p = (ev.plan.per_sample_ms || [])[r];
      if (p > 0) return p;
      const c = (ev.computes_ms || [])[r], sh = (ev.plan.shares || [])[r];
      return c > 0 && sh > 0 ? c / sh : NaN;
    });
    const arrival = mean((ev, r) => (ev.arrivals_ms || [])[r]);
    for (const [vals, why] of [[perSample, 'slow per sample'], [arrival, 'late arrival']]) {
      const med = median(vals);
      vals.forEach((v, r) => { if (Number.isFinite(v) && med > 0 && v > 1.5 * med) add(r, why); });
    }
    return out;
  }

  function fmtMs(v) {
    if (!Number.isFinite(v) || v < 0) return '–';
    return v >= 1000 ? (v / 1000).toFixed(2) + ' s' : v >= 10 ? v.toFixed(0) + ' ms' : v.toFixed(1) + ' ms';
  }
  function fmtRate(bps) {
    if (!Number.isFinite(bps)) return '–';
    if (bps >= 1e9) return (bps / 1e9).toFixed(2) + ' GB/s';
    if (bps >= 1e6) return (bps / 1e6).toFixed(1) + ' MB/s';
    if (bps === 0) return '0';
    return (bps / 1e3).toFixed(bps >= 1e4 ? 0 : 1) + ' kB/s';
  }

  function heatColor(x) {
    x = Math.max(0, Math.min(1, x)) * (HEAT.length - 1);
    const i = Math.min(HEAT.length - 2, Math.floor(x)), f = x - i;
    const c = HEAT[i].map((v, k) => Math.round(v + (HEAT[i + 1][k] - v) * f));
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  }

  // fit sizes a canvas's backing store to its CSS width and the given CSS
  // height and returns its 2D context scaled to CSS pixels.
  function fit(cv, height) {
    const dpr = window.devicePixelRatio || 1;
    const w = cv.clientWidth || cv.parentElement.clientWidth;
    cv.style.height = height + 'px';
    if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(height * dpr)) {
      cv.width = Math.round(w * dpr);
      cv.height = Math.round(height * dpr);
    }
    const g = cv.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, height);
    return { g, w, h: height };
  }

  let heatGeom = null; // for the tooltip

  function drawHeat(marks) {
    const n = Math.max(S.world, 1);
    const cv = $('heat');
    const width = cv.clientWidth || 800;
    const cellW = 6;
    const steps = sortedSteps(Math.max(1, Math.min(600, Math.floor(width / cellW))));
    const rowH = Math.max(14, Math.min(30, Math.floor(180 / n)));
    const { g, w } = fit(cv, rowH * n);
    const cw = steps.length ? w / Math.max(steps.length, Math.floor(width / cellW) / 2) : cellW;
    const vals = [];
    for (const s of steps) for (const a of s.ev.arrivals_ms || []) if (a >= 0) vals.push(a);
    vals.sort((a, b) => a - b);
    // The scale spans the visible arrivals (2nd to 98th percentile), so
    // that a few milliseconds of difference show once shares balance.
    const q = (f) => vals[Math.floor(f * (vals.length - 1))];
    let lo = vals.length ? q(0.02) : 0, hi = vals.length ? q(0.98) : 1;
    if (hi - lo < 1) lo = Math.max(0, hi - 1);
    steps.forEach((s, i) => {
      const ev = s.ev, x = i * cw;
      const evicted = new Set(ev.plan.evicted || []);
      for (let r = 0; r < n; r++) {
        const a = (ev.arrivals_ms || [])[r], y = r * rowH;
        if (!(a >= 0)) {
          g.fillStyle = '#cfcfcf';
          g.fillRect(x, y, Math.max(cw - 1, 1), rowH - 1);
        } else {
          g.fillStyle = heatColor((a - lo) / (hi - lo));
          g.fillRect(x, y, Math.max(cw - 1, 1), rowH - 1);
        }
        if (evicted.has(r)) {
          g.strokeStyle = '#111';
          g.lineWidth = 1;
          g.beginPath();
          g.moveTo(x + 1, y + 1); g.lineTo(x + cw - 2, y + rowH - 2);
          g.moveTo(x + cw - 2, y + 1); g.lineTo(x + 1, y + rowH - 2);
          g.stroke();
        }
      }
    });
    heatGeom = { steps, cw, rowH, n };
    const m = fit($('modes'), 22);
    steps.forEach((s, i) => {
      m.g.fillStyle = s.ev.plan.mode === 'evict' ? '#e0862d' : '#3b6fb6';
      m.g.fillRect(i * cw, 4, Math.max(cw - 1, 1), 14);
    });
    $('steps-shown').textContent = String(steps.length);
    $('scale-lo').textContent = fmtMs(lo);
    $('scale-hi').textContent = fmtMs(hi);
    const sc = $('scale').getContext('2d');
    for (let i = 0; i < 160; i++) { sc.fillStyle = heatColor(i / 159); sc.fillRect(i, 0, 1, 10); }
    // Row labels, with the straggler badge.
    const labels = $('heat-labels');
    while (labels.children.length < n) labels.appendChild(document.createElement('div'));
    while (labels.children.length > n) labels.removeChild(labels.lastChild);
    for (let r = 0; r < n; r++) {
      const el = labels.children[r];
      el.style.height = rowH + 'px';
      el.dataset.rank = String(r);
      const why = marks.get(r);
      el.dataset.straggler = why ? 'true' : 'false';
      el.innerHTML = `rank ${r}` + (why ? ` <span class="badge" title="${[...why].join(', ')}">straggler</span>` : '');
    }
  }

  function axes(g, w, h, pad, x0, x1, y1, fx, fy) {
    g.strokeStyle = '#e2e2e0';
    g.fillStyle = '#6b6b70';
    g.font = '11px system-ui, sans-serif';
    g.lineWidth = 1;
    for (let i = 0; i <= 4; i++) {
      const v = (y1 * i) / 4, y = h - pad.b - ((h - pad.t - pad.b) * i) / 4;
      g.beginPath(); g.moveTo(pad.l, y + 0.5); g.lineTo(w - pad.r, y + 0.5); g.stroke();
      g.textAlign = 'right'; g.fillText(fy(v), pad.l - 4, y + 4);
    }
    g.textAlign = 'center';
    for (let i = 0; i <= 4; i++) {
      const v = x0 + ((x1 - x0) * i) / 4, x = pad.l + ((w - pad.l - pad.r) * i) / 4;
      g.fillText(fx(v), x, h - pad.b + 14);
    }
  }

  // robustTop is the top of a scale for values ys that leaves out rare
  // outliers (a start-up spike hundreds of times the rest): the largest
  // value, unless it is over twice the 90th percentile, then 1.5× that.
  function robustTop(ys) {
    const v = ys.filter((y) => Number.isFinite(y)).sort((a, b) => a - b);
    if (!v.length) return 0;
    const q = v[Math.floor(0.9 * (v.length - 1))], top = v[v.length - 1];
    return top > 2 * q && q > 0 ? 1.5 * q : top;
  }

  // lineChart draws series [{color, dash, pts: [[x, y]]}]. With robust,
  // the scale leaves out outliers (robustTop), drawn as marks on the top
  // edge; it returns how many points it clipped.
  function lineChart(cv, series, fx, fy, robust) {
    const { g, w, h } = fit(cv, 200);
    const pad = { l: 66, r: 10, t: 8, b: 20 };
    let x0 = Infinity, x1 = -Infinity, y1 = 0;
    const ys = [];
    for (const s of series) for (const [x, y] of s.pts) { x0 = Math.min(x0, x); x1 = Math.max(x1, x); y1 = Math.max(y1, y); ys.push(y); }
    if (!Number.isFinite(x0)) { g.fillStyle = '#6b6b70'; g.fillText('no data yet', pad.l, 20); return 0; }
    if (x1 === x0) x1 = x0 + 1;
    if (robust) y1 = robustTop(ys);
    y1 = y1 > 0 ? y1 * 1.1 : 1;
    cv.dataset.top = String(y1);
    axes(g, w, h, pad, x0, x1, y1, fx, fy);
    const X = (x) => pad.l + ((x - x0) / (x1 - x0)) * (w - pad.l - pad.r);
    const Y = (y) => h - pad.b - (Math.min(y, y1) / y1) * (h - pad.t - pad.b);
    let clipped = 0;
    for (const s of series) {
      g.strokeStyle = s.color;
      g.lineWidth = 1.5;
      g.setLineDash(s.dash ? [4, 3] : []);
      g.beginPath();
      s.pts.forEach(([x, y], i) => (i ? g.lineTo(X(x), Y(y)) : g.moveTo(X(x), Y(y))));
      g.stroke();
      g.setLineDash([]);
      g.fillStyle = s.color;
      for (const [x, y] of s.pts) {
        if (y <= y1) continue;
        clipped++;
        g.beginPath(); g.moveTo(X(x) - 4, pad.t + 6); g.lineTo(X(x) + 4, pad.t + 6); g.lineTo(X(x), pad.t); g.fill();
      }
    }
    return clipped;
  }

  function legend(el, n) {
    let html = '';
    for (let r = 0; r < n; r++) html += `<span style="--c:${color(r)}">rank ${r}</span>`;
    if (el.innerHTML !== html) el.innerHTML = html;
  }

  function drawPred() {
    const steps = sortedSteps(120), n = S.world, series = [];
    for (let r = 0; r < n; r++) {
      const act = [], pred = [];
      for (const s of steps) {
        const a = (s.ev.arrivals_ms || [])[r], p = (s.ev.plan.predicted_ms || [])[r];
        if (a >= 0) act.push([s.step, a]);
        if (p > 0) pred.push([s.step, p]);
      }
      series.push({ color: color(r), pts: act }, { color: color(r), dash: true, pts: pred });
    }
    lineChart($('pred'), series, (v) => String(Math.round(v)), fmtMs);
    legend($('pred-legend'), n);
  }

  function drawBW() {
    let t0 = Infinity;
    for (const [, r] of S.ranks) for (const st of r.stats) t0 = Math.min(t0, st.t_ms);
    const series = [];
    const n = Math.max(S.world, S.ranks.size);
    for (let r = 0; r < n; r++) {
      const x = S.ranks.get(r);
      const pts = x ? x.stats.filter((st) => st.calls > 0).map((st) => [(st.t_ms - t0) / 1000, st.busbw_gbps]) : [];
      series.push({ color: color(r), pts });
    }
    const clipped = lineChart($('bw'), series, (v) => v.toFixed(0) + ' s', (v) => fmtRate(v * 1e9), true);
    $('bw').dataset.clipped = String(clipped);
    $('bw-clipped').textContent = clipped ? `; ${clipped} start-up ${clipped > 1 ? 'outliers' : 'outlier'} above the scale, marked ▲` : '';
    legend($('bw-legend'), n);
  }

  function drawShares(marks, last) {
    const el = $('shares');
    if (!last) { el.innerHTML = '<p class="muted">no steps yet</p>'; return; }
    const shares = last.next.shares && last.next.shares.length ? last.next.shares : last.plan.shares || [];
    const total = shares.reduce((a, b) => a + b, 0) || 1;
    $('shares-step').textContent = `(decided for step ${last.next.step}; global batch ${total})`;
    let html = '';
    shares.forEach((v, r) => {
      html += `<div class="bar${marks.has(r) ? ' straggler' : ''}" data-rank="${r}"><span>rank ${r}</span>` +
        `<div class="track"><div class="fill" style="width:${((100 * v) / total).toFixed(1)}%"></div></div>` +
        `<span>${v} (${((100 * v) / total).toFixed(0)}%)</span></div>`;
    });
    el.innerHTML = html;
  }

  function drawRanks(marks, last) {
    const tb = $('ranks').tBodies[0];
    const n = Math.max(S.world, S.ranks.size);
    let html = '';
    for (let r = 0; r < n; r++) {
      const x = S.ranks.get(r) || { info: null, last: null };
      const info = x.info || {}, st = x.last || {};
      const why = marks.get(r);
      const links = {};
      for (const l of info.links || []) links[l.transport] = (links[l.transport] || 0) + 1;
      const linkText = Object.entries(links).map(([t, c]) => `${c}× ${t}`).join(', ') || '–';
      const cpu = st.cpu_busy != null ? (100 * st.cpu_busy).toFixed(0) + '%' : '–';
      const net = st.net_rx_bps != null ? `${fmtRate(st.net_rx_bps)} / ${fmtRate(st.net_tx_bps)}` : '–';
      const gpu = (st.gpus || []).map((g) => `${g.name} ${(100 * g.util).toFixed(0)}% ${(g.mem_used / 2 ** 30).toFixed(1)}/${(g.mem_total / 2 ** 30).toFixed(0)} GiB`).join('; ') || '<span class="muted">none</span>';
      const arr = last ? (last.arrivals_ms || [])[r] : NaN, pred = last ? (last.plan.predicted_ms || [])[r] : NaN;
      const state = why ? `<span title="${[...why].join(', ')}">straggler</span>` : x.info ? 'ok' : 'waiting';
      html += `<tr data-rank="${r}" data-straggler="${why ? 'true' : 'false'}" class="${why ? 'straggler' : ''}">` +
        `<td>${r}</td><td>${info.host || '–'}</td><td class="state">${state}</td><td>${linkText}</td><td>${cpu}</td>` +
        `<td>${net}</td><td>${gpu}</td><td>${fmtMs(arr)}${pred > 0 ? ` <span class="muted">(pred ${fmtMs(pred)})</span>` : ''}</td></tr>`;
    }
    tb.innerHTML = html;
  }

  // progressPoints returns the progress of the lowest rank that reports
  // any (the loop's numbers are the job's; usually rank 0 reports).
  function progressPoints() {
    const ranks = [...S.progress.keys()].sort((a, b) => a - b);
    return ranks.length ? S.progress.get(ranks[0]) : [];
  }

  // drawTrain draws the training curve: held-out accuracy (left axis,
  // 0–100%) and training loss (right axis) over training time.
  function drawTrain(pts) {
    const cv = $('train');
    const { g, w, h } = fit(cv, 220);
    const pad = { l: 52, r: 58, t: 10, b: 22 };
    const acc = pts.filter((p) => p.accuracy != null).map((p) => [p.elapsed_ms / 1000, 100 * p.accuracy]);
    const loss = pts.filter((p) => p.loss != null).map((p) => [p.elapsed_ms / 1000, p.loss]);
    cv.dataset.points = String(pts.length);
    cv.dataset.accuracyPoints = String(acc.length);
    cv.dataset.lossPoints = String(loss.length);
    $('train-shown').textContent = String(pts.length);
    g.font = '11px system-ui, sans-serif';
    if (!acc.length && !loss.length) {
      g.fillStyle = '#6b6b70';
      g.fillText('no progress reported yet: the training loop reports it with Comm.RecordProgress (Go) or ringtail_torch.report_progress (PyTorch)', pad.l, 24);
      return;
    }
    let x0 = Infinity, x1 = -Infinity, l1 = 0;
    for (const [x] of acc.concat(loss)) { x0 = Math.min(x0, x); x1 = Math.max(x1, x); }
    for (const [, y] of loss) l1 = Math.max(l1, y);
    x0 = Math.min(x0, 0);
    if (x1 <= x0) x1 = x0 + 1;
    l1 = l1 > 0 ? l1 * 1.1 : 1;
    const X = (x) => pad.l + ((x - x0) / (x1 - x0)) * (w - pad.l - pad.r);
    const YA = (y) => h - pad.b - (y / 100) * (h - pad.t - pad.b);
    const YL = (y) => h - pad.b - (y / l1) * (h - pad.t - pad.b);
    g.strokeStyle = '#e2e2e0';
    g.lineWidth = 1;
    for (let i = 0; i <= 4; i++) {
      const y = h - pad.b - ((h - pad.t - pad.b) * i) / 4;
      g.beginPath(); g.moveTo(pad.l, y + 0.5); g.lineTo(w - pad.r, y + 0.5); g.stroke();
      g.fillStyle = '#4c9a4c'; g.textAlign = 'right'; g.fillText((25 * i) + '%', pad.l - 4, y + 4);
      g.fillStyle = '#c62828'; g.textAlign = 'left'; g.fillText(((l1 * i) / 4).toFixed(l1 < 1 ? 3 : 2), w - pad.r + 4, y + 4);
    }
    g.fillStyle = '#6b6b70'; g.textAlign = 'center';
    for (let i = 0; i <= 4; i++) g.fillText((x0 + ((x1 - x0) * i) / 4).toFixed(x1 - x0 < 8 ? 1 : 0) + ' s', X(x0 + ((x1 - x0) * i) / 4), h - pad.b + 15);
    for (const [series, Y, c] of [[acc, YA, '#4c9a4c'], [loss, YL, '#c62828']]) {
      g.strokeStyle = c; g.fillStyle = c; g.lineWidth = 1.8;
      g.beginPath();
      series.forEach(([x, y], i) => (i ? g.lineTo(X(x), Y(y)) : g.moveTo(X(x), Y(y))));
      g.stroke();
      if (series.length <= 200) for (const [x, y] of series) { g.beginPath(); g.arc(X(x), Y(y), 2.5, 0, 2 * Math.PI); g.fill(); }
    }
  }

  function drawSummary(last) {
    $('world').textContent = S.world || '–';
    if (last) {
      $('step').textContent = String(last.step);
      $('mode').textContent = last.plan.mode || 'ring';
      $('evicted').textContent = (last.plan.evicted || []).length ? last.plan.evicted.join(', ') : 'none';
      $('tw').textContent = last.plan.wait_until_ms > 0 ? fmtMs(last.plan.wait_until_ms) : '–';
    }
    let bw = 0, k = 0;
    for (const [, r] of S.ranks) if (r.last && r.last.calls > 0) { bw += r.last.busbw_gbps; k++; }
    $('busbw').textContent = k ? fmtRate((bw / k) * 1e9) : '–';
    // The loop's last report, each measure from the last point that has it.
    const pts = progressPoints();
    const lastWith = (f) => { for (let i = pts.length - 1; i >= 0; i--) if (f(pts[i])) return pts[i]; return null; };
    const a = lastWith((q) => q.accuracy != null), l = lastWith((q) => q.loss != null);
    const st = lastWith((q) => q.step_ms > 0), sp = lastWith((q) => q.samples_per_sec > 0);
    const ep = lastWith((q) => q.epoch > 0);
    $('epoch').textContent = ep ? (Number.isInteger(ep.epoch) ? String(ep.epoch) : ep.epoch.toFixed(2)) : '–';
    $('loss').textContent = l ? l.loss.toFixed(4) : '–';
    $('acc').textContent = a ? (100 * a.accuracy).toFixed(2) + '%' : '–';
    $('steptime').textContent = st ? fmtMs(st.step_ms) : '–';
    $('sps').textContent = sp ? sp.samples_per_sec.toFixed(0) : '–';
  }

  function draw() {
    const marks = stragglers();
    const lastStep = S.steps.get(S.maxStep);
    const last = lastStep ? lastStep.ev : null;
    drawSummary(last);
    drawTrain(progressPoints());
    drawHeat(marks);
    drawPred();
    drawShares(marks, last);
    drawBW();
    drawRanks(marks, last);
  }

  // The heatmap's tooltip.
  $('heat').addEventListener('mousemove', (e) => {
    const tip = $('tip');
    if (!heatGeom) return;
    const rect = e.target.getBoundingClientRect();
    const i = Math.floor((e.clientX - rect.left) / heatGeom.cw), r = Math.floor((e.clientY - rect.top) / heatGeom.rowH);
    const s = heatGeom.steps[i];
    if (!s || r < 0 || r >= heatGeom.n) { tip.hidden = true; return; }
    const ev = s.ev;
    tip.textContent = `step ${s.step}, rank ${r}\narrival ${fmtMs((ev.arrivals_ms || [])[r])}` +
      `\npredicted ${fmtMs((ev.plan.predicted_ms || [])[r])}\nshare ${(ev.plan.shares || [])[r] ?? '–'}` +
      `\nmode ${ev.plan.mode}${(ev.plan.evicted || []).includes(r) ? ' (evicted)' : ''}`;
    const panel = e.target.closest('.panel').getBoundingClientRect();
    tip.style.left = e.clientX - panel.left + 12 + 'px';
    tip.style.top = e.clientY - panel.top + 12 + 'px';
    tip.hidden = false;
  });
  $('heat').addEventListener('mouseleave', () => { $('tip').hidden = true; });
  window.addEventListener('resize', schedule);

  const es = new EventSource('api/events');
  es.onopen = () => { $('conn').textContent = 'live'; $('conn').classList.add('ok'); };
  es.onerror = () => { $('conn').textContent = 'reconnecting…'; $('conn').classList.remove('ok'); };
  es.onmessage = (e) => {
    try { onMessage(JSON.parse(e.data)); } catch (err) { console.error(err); }
  };
})();
