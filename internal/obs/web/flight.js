// ringtail dashboard, flight panel: what the ranks' flight recorders tell
// (the dashboard reads their /debug/flight and runs the same analysis as
// `ringtail debug analyze`), and the links that fell back to a slower
// transport. Self-contained: its own /api/events stream.
'use strict';
(() => {
  const story = document.getElementById('flight-story');
  const warn = document.getElementById('flight-warnings');
  if (!story || !warn) return;
  const fallbacks = new Map(); // rank -> [text]
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));

  function drawStory(m) {
    const lines = m.lines || [];
    const bad = (m.culprits || []).length > 0;
    story.className = bad ? 'flight bad' : 'flight';
    story.innerHTML = lines.map((l) => `<div>${esc(l)}</div>`).join('') +
      `<div class="muted">${m.ranks_read} rank(s) read` +
      ((m.unread || []).length ? `, ${m.unread.length} unreadable` : '') +
      ` at ${new Date(m.t_ms).toLocaleTimeString()}</div>`;
  }

  function drawWarnings() {
    const rows = [];
    for (const [r, ws] of [...fallbacks.entries()].sort((a, b) => a[0] - b[0])) {
      for (const w of ws) rows.push(`<div class="bad">rank ${r}: ${esc(w)}</div>`);
    }
    warn.innerHTML = rows.join('') || '<div class="muted">no transport fell back</div>';
  }

  const es = new EventSource('/api/events');
  es.onmessage = (ev) => {
    let m;
    try { m = JSON.parse(ev.data); } catch (e) { return; }
    if (m.kind === 'flight') {
      drawStory(m);
    } else if (m.kind === 'info') {
      const ws = (m.links || []).filter((l) => l.fallback).map((l) => `link to rank ${l.peer} (channel ${l.channel}) on ${l.transport}: ${l.fallback}`);
      fallbacks.set(m.rank, ws);
      drawWarnings();
    }
  };
  drawWarnings();
})();
