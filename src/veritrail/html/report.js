// VeriTrail HTML report viewer. Self-contained: no network, no libraries.
//
// Safety rule of this file: every string that comes from the report (node text, claims,
// reasoning, ids) reaches the page through textContent, Text nodes or setAttribute on non-URL
// attributes. Nothing from the data is ever assigned to innerHTML or used as a URL.
(function () {
  'use strict';

  var DATA = JSON.parse(document.getElementById('vt-data').textContent);
  var VERDICTS = ['Fully Supported', 'Not Fully Supported', 'Inconclusive'];
  var VCLASS = { 'Fully Supported': 'fs', 'Not Fully Supported': 'nfs', 'Inconclusive': 'inc' };
  var SVGNS = 'http://www.w3.org/2000/svg';

  function vclass(v) { return v == null ? 'err' : (VCLASS[v] || 'err'); }
  function vlabel(v) { return v == null ? 'Error' : v; }
  function fmtInt(n) { return Number(n || 0).toLocaleString('en-US'); }
  function fmtUsd(x) { return '$' + Number(x || 0).toFixed(x >= 1 ? 2 : 4); }
  // display.py's unpriced_models and fmt_dollars, so the page and the terminal agree.
  var NO_PRICE_NOTE = 'no price known for ';
  function unpricedModels(notes) {
    var out = [];
    notes.forEach(function (n) {
      if (typeof n !== 'string' || n.indexOf(NO_PRICE_NOTE) !== 0) return;
      var name = n.slice(NO_PRICE_NOTE.length).split(';')[0].trim();
      if (name && out.indexOf(name) < 0) out.push(name);
    });
    return out;
  }
  function fmtDollars(x, unpriced) {
    var usd = '$' + Number(x || 0).toFixed(4);
    if (!unpriced.length) return usd;
    var why = 'no price for ' + unpriced.join(', ');
    return Number(x || 0) <= 0 ? 'cost unknown (' + why + ')' : usd + ' + unknown (' + why + ')';
  }
  function plural(n, word) { return fmtInt(n) + ' ' + word + (Number(n) === 1 ? '' : 's'); }
  function pct(x) { return (100 * Number(x || 0)).toFixed(1) + '%'; }
  // Every string from the data (ids, paths, claims, node text, reasoning, errors) is shown
  // with its bidirectional embedding/override/isolate controls and marks made visible as code
  // points ("[U+202E]"), never applied: an override would show "summer" as "remmus", so the
  // reader would see a text other than the one that was verified. `el`/`setAttrs` apply this
  // to every text they set, so no call site can forget it. The elements holding data are also
  // isolated (<bdi>, and unicode-bidi: isolate in report.css), so the ordinary bidi of
  // right-to-left text cannot reorder what follows it.
  var BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]/g;
  function showText(s) {
    return String(s == null ? '' : s).replace(BIDI_CONTROLS, function (ch) {
      return '[U+' + ('000' + ch.charCodeAt(0).toString(16).toUpperCase()).slice(-4) + ']';  // U+061C, not U+61C
    });
  }
  function showIds(list, sep) { return (list || []).map(showText).join(sep); }

  // Fill `box` with `text`, the [start, end) ranges (UTF-16 offsets into `text`, as a report's
  // offsets give them in `start_utf16`/`end_utf16`) wrapped in <mark>; text nodes only.
  function markedText(box, text, ranges, cls) {
    box.textContent = '';
    var at = 0;
    ranges.map(function (r) { return [Math.max(0, r[0]), Math.min(text.length, r[1])]; })
      .filter(function (r) { return r[0] < r[1]; })
      .sort(function (a, b) { return a[0] - b[0]; })
      .forEach(function (r) {
        if (r[1] <= at) return;
        var a = Math.max(r[0], at);
        if (a > at) box.append(document.createTextNode(showText(text.slice(at, a))));
        var m = document.createElement('mark');
        if (cls) m.className = cls;
        m.textContent = showText(text.slice(a, r[1]));
        box.append(m);
        at = r[1];
      });
    if (at < text.length) box.append(document.createTextNode(showText(text.slice(at))));
  }

  // el('div', {class: 'x', text: 'y'}, child...): children may be nodes or strings (Text nodes).
  function el(tag, attrs) {
    var e = document.createElement(tag);
    setAttrs(e, attrs);
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c == null) continue;
      // A string child is data next to other content: isolate it in its own <bdi>.
      if (typeof c === 'string') { var b = document.createElement('bdi'); b.textContent = showText(c); c = b; }
      e.append(c);
    }
    return e;
  }
  function setAttrs(e, attrs) {
    if (!attrs) return;
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v == null) return;
      if (k === 'class') e.setAttribute('class', v);
      else if (k === 'text') e.textContent = showText(v);
      else if (k === 'title') e.setAttribute(k, showText(v));  // a tooltip shows data too
      else if (k.slice(0, 2) === 'on') e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, String(v));
    });
  }
  function sv(tag, attrs) {
    var e = document.createElementNS(SVGNS, tag);
    setAttrs(e, attrs);
    return e;
  }

  // ---- indexes ---------------------------------------------------------------------------
  var claims = DATA.claims || [];
  var dag = DATA.dag || {};
  var nodes = dag.nodes_touched || [];
  var nodeById = {};
  nodes.forEach(function (n) { nodeById[n.id] = n; });
  var claimById = {};
  claims.forEach(function (c) { claimById[c.id] = c; });

  var state = { selected: null, verdicts: {}, stage: 'any', query: '', focusNode: null, trailOnly: false, sentence: null };
  VERDICTS.concat(['Error']).forEach(function (v) { state.verdicts[v] = true; });

  // ---- header and summary ----------------------------------------------------------------
  function renderHeader() {
    var h = document.getElementById('vt-header');
    var meta = el('div', { class: 'meta' },
      el('span', { text: 'model ' + (DATA.model || '?') }),
      el('span', { text: fmtInt(claims.length) + ' claims' }),
      el('span', { text: 'DAG ' + showText(dag.path || '(in memory)') + ', ' + fmtInt(dag.nodes) + ' nodes, ' + (dag.max_stage || '?') + ' stages' }),
      DATA.config && DATA.config.q != null ? el('span', { text: 'q = ' + DATA.config.q }) : null,
      DATA.run && DATA.run.finished ? el('span', { text: 'finished ' + DATA.run.finished }) : null,
      DATA.run && DATA.run.partial ? el('span', { class: 'partial', text: 'PARTIAL: ' + claims.length + ' of ' + DATA.run.claims_total + ' claims finished' }) : null);
    h.append(el('h1', { text: 'VeriTrail report' }), meta);
    var label = modelLabel();
    if (label) {
      // Above everything else: verdicts of a small or demonstration model are not a judge's.
      h.append(el('div', { class: 'model-banner', id: 'vt-model-banner', role: 'note',
        text: 'Verdicts by ' + (DATA.model || '?') + ': ' + label + '.' }));
    }
    ((DATA.run && DATA.run.notes) || []).forEach(function (n) { h.append(el('div', { class: 'note run-note', text: String(n) })); });
  }

  // What made the verdicts (report version 3's model_kind/model_label; derived from the model's
  // name for older reports, as veritrail.report.model_kind does). Null for a judge.
  var MODEL_LABELS = {
    demonstration: 'demonstration, not a judge',
    embedded: 'embedded small model, for trying the tool, not a judge',
    oracle: 'verdicts read from an oracle file, no model'
  };
  function modelKind() {
    if (DATA.model_kind) return DATA.model_kind;
    var m = String(DATA.model || '');
    if (m.indexOf('demo/') === 0 || m.split('/').slice(1).join('/').indexOf('demo') === 0) return 'demonstration';
    if (m.indexOf('local/') === 0) return 'embedded';
    return m === 'oracle' ? 'oracle' : 'judge';
  }
  function modelLabel() {
    if (DATA.model_label !== undefined) return DATA.model_label;
    return MODEL_LABELS[modelKind()] || null;
  }

  function renderSummary() {
    var s = DATA.summary || {};
    var sec = document.getElementById('vt-summary');
    sec.append(el('h2', { text: 'Summary' }));
    var grid = el('div', { class: 'summary-grid' });
    var tiles = el('div', { class: 'tiles', id: 'vt-tiles' });
    var counts = s.verdicts || {};
    VERDICTS.forEach(function (v) {
      tiles.append(el('div', { class: 'tile ' + vclass(v), 'data-verdict': v },
        el('span', { class: 'n', text: fmtInt(counts[v]) }), el('span', { class: 'l', text: v })));
    });
    if (counts.error) {
      tiles.append(el('div', { class: 'tile err', 'data-verdict': 'Error' },
        el('span', { class: 'n', text: fmtInt(counts.error) }), el('span', { class: 'l', text: 'Error' })));
    }
    grid.append(tiles);
    grid.append(errorStageChart(s));
    grid.append(costBox(s));
    sec.append(grid);
  }

  // Stages drawn one bar each up to this many; a deeper DAG (a 200,000-stage chain) shows the
  // stages with the most claims and says how many more there are.
  var MAX_STAGE_BARS = 30;
  function chartStages(counts, max) {
    if (max <= MAX_STAGE_BARS) {
      var all = [];
      for (var k = 1; k <= max; k++) all.push(k);
      return { stages: all, more: 0 };
    }
    var hit = Object.keys(counts).map(Number).filter(function (k) { return Number(counts[String(k)]) > 0; });
    hit.sort(function (a, b) { return (Number(counts[String(b)]) - Number(counts[String(a)])) || (a - b); });
    var top = hit.slice(0, MAX_STAGE_BARS).sort(function (a, b) { return a - b; });
    return { stages: top, more: max - top.length };
  }

  function errorStageChart(s) {
    var box = el('div', { class: 'box', id: 'vt-stage-chart' }, el('h3', { text: 'Error stages' }));
    var max = Number(dag.max_stage || 1);
    var counts = s.error_stages || {};
    var shown = chartStages(counts, max);
    var top = 0;
    shown.stages.forEach(function (st) { top = Math.max(top, Number(counts[String(st)] || 0)); });
    var bw = 34, gap = 10, h = 90, W = Math.max(1, shown.stages.length) * (bw + gap) + 30, H = h + 36;
    var g = sv('svg', { class: 'bars', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img',
      'aria-label': 'claims attributed to each error stage' });
    g.append(sv('line', { class: 'axis', x1: 20, y1: h + 12, x2: W, y2: h + 12 }));
    shown.stages.forEach(function (k, i) {
      var n = Number(counts[String(k)] || 0);
      var bh = top ? Math.round(h * n / top) : 0;
      var x = 24 + i * (bw + gap);
      var r = sv('rect', { class: 'bar', x: x, y: h + 12 - bh, width: bw, height: bh, 'data-stage': k });
      var tt = sv('title'); tt.textContent = 'stage ' + k + ': ' + n + ' claims';
      r.append(tt);
      g.append(r);
      var lab = sv('text', { x: x + bw / 2, y: h + 26, 'text-anchor': 'middle' }); lab.textContent = String(k);
      var val = sv('text', { x: x + bw / 2, y: h + 8 - bh, 'text-anchor': 'middle' }); val.textContent = n ? String(n) : '';
      g.append(lab, val);
    });
    box.append(g);
    if (shown.more) box.append(el('div', { class: 'note stage-more', text: fmtInt(shown.more) + ' more stages (not shown: fewer or no claims)' }));
    var noStage = claims.filter(function (c) { return c.error_stage_status === 'not_identifiable'; }).length;
    box.append(el('div', { class: 'note', text: 'stage (1 = sources) · not identifiable: ' + noStage }));
    return box;
  }

  function costBox(s) {
    // The same figures as the terminal's Cost table (run/summary.py summary_tables): the claims'
    // cost plus claim extraction's, cache hits counted among the calls, and "cost unknown" for
    // a model with no price rather than a $0 that reads as a price.
    var c = s.cost || {};
    var ext = (DATA.run && DATA.run.extraction_cost) || {};
    function total(k) { return Number(c[k] || 0) + Number(ext[k] || 0); }
    var t = el('table', { class: 'kv' });
    function row(k, v) { t.append(el('tr', null, el('td', { text: k }), el('td', { text: v }))); }
    row('model calls', fmtInt(total('lm_calls')));
    if (DATA.run && DATA.run.extraction_cost) row('of which claim extraction', fmtInt(ext.lm_calls));
    row('of which from cache', fmtInt(total('cached_calls')));
    row('tokens in / out', fmtInt(total('input_tokens')) + ' / ' + fmtInt(total('output_tokens')));
    row('cost', fmtDollars(total('dollars'), unpricedModels((DATA.run && DATA.run.notes) || [])));
    var readMean = Number(c.nodes_read_mean || 0);
    row('nodes read per claim', readMean.toFixed(1) + (dag.nodes ? ' (' + pct(readMean / dag.nodes) + ' of ' + fmtInt(dag.nodes) + ')' : ''));
    row('nodes read by any claim', fmtInt(Math.max(0, nodes.length - 1)));
    var terms = s.terminations || {};
    row('stopped by', Object.keys(terms).map(function (k) { return k + ' ' + terms[k]; }).join(', ') || '-');
    return el('div', { class: 'box', id: 'vt-cost' }, el('h3', { text: 'Cost' }), t);
  }

  // ---- terminal text ---------------------------------------------------------------------
  var sentenceEls = [];
  function renderTerminal() {
    var sents = dag.terminal_sentences || [];
    var sec = document.getElementById('vt-terminal');
    if (!sents.length) return;
    sec.append(el('h2', { text: 'Final output (node ' + dag.terminal + ')' }));
    var box = el('div', { class: 'text', id: 'vt-terminal-text' });
    sents.forEach(function (t, i) {
      var sp = el('span', { class: 'sent', 'data-sentence': i, title: 'sentence ' + i + ': click to show the claims from it', text: t });
      sp.addEventListener('click', function () {
        state.sentence = state.sentence === i ? null : i;
        sentenceEls.forEach(function (x, j) { x.classList.toggle('active', j === state.sentence); });
        applyFilters();
      });
      sentenceEls.push(sp);
      box.append(sp, ' ');
    });
    sec.append(box);
  }

  // ---- controls --------------------------------------------------------------------------
  function renderControls() {
    var sec = document.getElementById('vt-controls');
    var vbox = el('span', { id: 'vt-verdict-filter' }, el('strong', { text: 'Verdict: ' }));
    VERDICTS.concat(['Error']).forEach(function (v) {
      var cb = el('input', { type: 'checkbox', 'data-verdict': v });
      cb.checked = true;
      cb.addEventListener('change', function () { state.verdicts[v] = cb.checked; applyFilters(); });
      vbox.append(el('label', null, cb, ' ' + v + ' '));
    });
    var sel = el('select', { id: 'vt-stage-filter', 'aria-label': 'error stage filter' });
    sel.append(el('option', { value: 'any', text: 'any error stage' }));
    // One option per stage, or, for a very deep DAG, per stage that some claim is attributed to.
    var stageOpts = [];
    var maxStage = Number(dag.max_stage || 0);
    if (maxStage <= MAX_STAGE_BARS) { for (var k = 1; k <= maxStage; k++) stageOpts.push(k); }
    else {
      var seen = {};
      claims.forEach(function (c) { (c.error_stages || []).forEach(function (st) { seen[st] = 1; }); });
      stageOpts = Object.keys(seen).map(Number).sort(function (a, b) { return a - b; });
    }
    stageOpts.forEach(function (k) { sel.append(el('option', { value: String(k), text: 'error stage ' + k })); });
    sel.append(el('option', { value: 'none', text: 'no identifiable stage' }));
    sel.addEventListener('change', function () { state.stage = sel.value; applyFilters(); });
    var q = el('input', { type: 'search', id: 'vt-search', placeholder: 'Search claims, reasoning, evidence, node ids' });
    q.addEventListener('input', function () { state.query = q.value; applyFilters(); });
    sec.append(vbox, el('label', null, el('strong', { text: 'Stage: ' }), sel), q, el('span', { id: 'vt-count' }));
  }

  // ---- claim cards -----------------------------------------------------------------------
  var cards = {};
  function renderClaims() {
    var sec = document.getElementById('vt-claims');
    sec.append(el('h2', { text: 'Claims' }));
    claims.forEach(function (c) { var card = claimCard(c); cards[c.id] = card; sec.append(card); });
  }

  // Shared prompts (config.claims_per_prompt > 1) count a shared call once, on one claim of its
  // group (docs/method.md, "Costs"): a card's "0 model calls" would read as "nothing was asked".
  var SHARED = !!(DATA.config && DATA.config.claims_per_prompt > 1 && (DATA.claims || []).length > 1);
  function callsNote(cost) {
    var text = plural(cost.lm_calls || 0, 'model call');
    if (!SHARED) return el('span', { text: text });
    return el('span', { class: 'calls-shared',
      title: 'Claims that share a prompt count each shared call once, on the claim of the group with the least id; the run\'s total is exact.',
      text: text + ' (shared prompts: counted once, on one claim)' });
  }

  function claimCard(c) {
    var cls = vclass(c.verdict);
    var card = el('article', { class: 'card ' + cls, 'data-claim-id': c.id, 'data-verdict': vlabel(c.verdict), tabindex: 0 });
    var cost = c.cost || {};
    var blamed = blamedOf(c);
    var stageText = c.error_stage_status === 'identified' ? 'error stage ' + c.error_stages.join(', ') +
      (blamed.length ? ', node' + (blamed.length > 1 ? 's ' : ' ') + showIds(blamed, ', ') : '')
      : c.error_stage_status === 'not_identifiable' ? 'error stage not identifiable' : null;
    card.append(
      el('div', { class: 'head' },
        el('span', { class: 'badge ' + cls, text: vlabel(c.verdict) }),
        el('span', { class: 'mono', text: showText(c.id) }),
        el('span', { class: 'badge plain', text: c.termination }),
        c.score != null ? el('span', { class: 'badge plain', text: 'score ' + Number(c.score).toFixed(2) }) : null,
        c.review ? el('span', { class: 'badge reviewed ' + vclass(c.review.verdict), text: 'reviewed: ' + c.review.verdict }) : null),
      el('div', { class: 'claim-text', text: c.text }),
      el('div', { class: 'meta' },
        el('span', { text: plural((c.iterations || []).length, 'iteration') }),
        el('span', { text: fmtInt(cost.nodes_read) + ' nodes read (' + pct(cost.nodes_read_share) + ')' }),
        callsNote(cost),
        stageText ? el('span', { class: 'stage-text', text: stageText }) : null));
    var brief = reasoningBrief(c);
    if (brief) card.append(brief);
    var review = reviewLine(c);
    if (review) card.append(review);
    var cite = citationLine(c);
    if (cite) card.append(cite);
    var det = el('details', { class: 'more' }, el('summary', { text: 'Reasoning and evidence trail' }));
    if (c.error) det.append(el('h4', { text: 'Error' }), el('div', { class: 'error-text', text: c.error }));
    det.append(el('h4', { text: 'Reasoning' }), el('p', { class: 'reasoning', text: c.reasoning || '(none)' }));
    if ((c.subclaims || []).length > 1) {
      var ul = el('ul');
      c.subclaims.forEach(function (s) { ul.append(el('li', { text: s })); });
      det.append(el('h4', { text: 'Sub-claims' }), ul);
    }
    det.append(el('h4', { text: 'Iterations' }));
    (c.iterations || []).forEach(function (it) { det.append(iterationBlock(it)); });
    if ((c.provenance || []).length) {
      det.append(el('h4', { text: 'Provenance' }));
      c.provenance.forEach(function (p) {
        det.append(el('div', { class: 'path', text: showIds([dag.terminal].concat(p), ' \u2190 ') }));
      });
    }
    if ((c.issues || []).length) {
      var iu = el('ul');
      c.issues.forEach(function (i) { iu.append(el('li', null, el('span', { class: 'nid', text: showText(i.kind) }), i.detail)); });
      det.append(el('h4', { text: 'Issues' }), iu);
    }
    card.append(det);
    card.addEventListener('click', function (ev) {
      if (ev.target.closest && ev.target.closest('summary')) return;
      select(c.id);
    });
    card.addEventListener('keydown', function (ev) { if (ev.key === 'Enter') select(c.id); });
    return card;
  }

  // The judge's reasoning on the card: cut with an ellipsis, in full on demand ("show all").
  var REASONING_SHOWN = 160;
  function reasoningBrief(c) {
    var full = String(c.reasoning || '');
    if (!full) return null;
    var cut = full.length > REASONING_SHOWN;
    var text = el('span', { class: 'reasoning-text', text: cut ? full.slice(0, REASONING_SHOWN - 1).trimEnd() + '\u2026' : full });
    var box = el('div', { class: 'reasoning-brief' }, el('span', { class: 'note', text: 'reasoning: ' }), text);
    if (cut) {
      var more = el('button', { type: 'button', class: 'linklike reasoning-more', text: 'show all' });
      more.addEventListener('click', function (ev) {
        ev.stopPropagation();
        var open = more.getAttribute('aria-expanded') === 'true';
        text.textContent = showText(open ? full.slice(0, REASONING_SHOWN - 1).trimEnd() + '\u2026' : full);
        more.textContent = open ? 'show all' : 'show less';
        more.setAttribute('aria-expanded', open ? 'false' : 'true');
      });
      more.setAttribute('aria-expanded', 'false');
      box.append(' ', more);
    }
    return box;
  }

  // A person's review (report version 2) beside the model's verdict, never in its place.
  function reviewLine(c) {
    var r = c.review;
    if (!r) return null;
    var who = 'by ' + String(r.author || '?') + (r.time ? ', ' + String(r.time) : '') +
      (r.count > 1 ? ', ' + r.count + ' reviews' : '');
    return el('div', { class: 'review', 'data-review-verdict': r.verdict },
      el('span', { text: 'model: ' + vlabel(c.verdict) + ', reviewed: ' + r.verdict +
        (r.error_stage != null ? ', error stage ' + r.error_stage + ((r.nodes || []).length ? ', node ' + showIds(r.nodes, ', ') : '') : '') }),
      el('span', { class: 'note', text: ' (' + who + ')' }),
      el('div', { class: 'review-reason', text: r.reason }));
  }

  // The claim's own citation markers against the sources holding its evidence (report
  // version 4, `--citations`; followed_nodes version 5; docs/citations.md).
  var CITATION_WORDS = {
    supported_by_cited: ['fs', 'supported by the cited source'],
    misattributed: ['nfs', 'misattributed: supported only by a source it does not cite'],
    cited_not_supporting: ['nfs', 'the cited source does not support it'],
    unsupported: ['inc', 'no source supports it'],
    uncited: ['plain', 'uncited']
  };
  function citationLine(c) {
    var ct = c.citation;
    if (!ct) return null;
    var words = CITATION_WORDS[ct.kind] || ['err', 'no citation status (no verdict)'];
    var parts = [];
    if ((ct.markers || []).length) parts.push('markers ' + showIds(ct.markers, ' '));
    if ((ct.cited_nodes || []).length) parts.push('cites ' + showIds(ct.cited_nodes, ', '));
    // Version 5: a cited intermediate node followed down to the sources its markers name.
    var followed = ct.followed_nodes;
    if (followed && showIds(followed, ', ') !== showIds(ct.cited_nodes || [], ', ')) {
      parts.push('followed to ' + (showIds(followed, ', ') || 'no source'));
    }
    if ((ct.unresolved || []).length) parts.push('names no source: ' + showIds(ct.unresolved, ', '));
    if ((ct.supporting_nodes || []).length) parts.push('evidence in ' + showIds(ct.supporting_nodes, ', '));
    if (ct.located_by === 'text' || ct.located_by === 'overlap') parts.push('claim found in the answer by its ' + (ct.located_by === 'text' ? 'text' : 'words'));
    return el('div', { class: 'citation', 'data-citation-status': ct.kind || '' },
      el('span', { class: 'badge ' + words[0], text: 'citation: ' + words[1] }),
      parts.length ? el('span', { class: 'note', text: ' ' + parts.join('; ') }) : null);
  }

  function iterationBlock(it) {
    var b = el('div', { class: 'iter', 'data-iteration': it.index });
    b.append(el('div', { class: 'title' },
      'Iteration ' + it.index + ': ',
      el('span', { class: 'badge ' + vclass(it.verdict), text: it.verdict }),
      it.verdict_called_lm ? null : el('span', { class: 'note', text: ' (no evidence: no model call)' })));
    b.append(el('div', { class: 'note', text: 'checked: ' + (showIds(it.nodes_checked, ', ') || '-') +
      (it.carried_roots.length ? ' · carried roots: ' + showIds(it.carried_roots, ', ') : '') +
      ' · evidence from: ' + (showIds(it.nodes_with_evidence, ', ') || '-') }));
    if (it.evidence.length) {
      var ul = el('ul', { class: 'ev' });
      it.evidence.forEach(function (e) {
        var chip = el('span', { class: 'nid link', title: 'show node ' + showText(e.node_id) + ' in the DAG', text: showText(e.node_id) + ' #' + e.sentence_index });
        chip.addEventListener('click', function () { focusNode(e.node_id); });
        ul.append(el('li', null, chip, el('q', { text: e.text })));
      });
      b.append(ul);
    }
    it.summaries.forEach(function (s) {
      b.append(el('blockquote', { class: 'sum' }, el('span', { class: 'nid', text: showIds(s.node_ids, ', ') }), s.text));
    });
    if (it.dropped_ids.length) b.append(el('div', { class: 'note', text: 'ids dropped (not in the prompt): ' + showIds(it.dropped_ids, ', ') }));
    if (it.compression_reruns) b.append(el('div', { class: 'note', text: 'evidence compressed ' + it.compression_reruns + 'x' + (it.evidence_truncated ? ', then truncated' : '') }));
    b.append(el('div', { class: 'note', text: it.reasoning ? 'verdict reasoning: ' + it.reasoning : '' }));
    return b;
  }

  // ---- filters ---------------------------------------------------------------------------
  function searchText(c) {
    if (c._search) return c._search;
    var parts = [c.id, c.text, c.reasoning || '', c.error || ''].concat(c.subclaims || []);
    (c.iterations || []).forEach(function (it) {
      parts = parts.concat(it.nodes_checked, it.evidence.map(function (e) { return e.node_id + ' ' + e.text; }),
        it.summaries.map(function (s) { return s.text; }));
    });
    c._search = parts.join('\n').toLowerCase();
    return c._search;
  }

  function matches(c) {
    if (!state.verdicts[vlabel(c.verdict)]) return false;
    if (state.stage === 'none' && c.error_stage_status !== 'not_identifiable') return false;
    if (state.stage !== 'any' && state.stage !== 'none' && (c.error_stages || []).indexOf(Number(state.stage)) < 0) return false;
    if (state.sentence != null && (c.sentence_indices || []).indexOf(state.sentence) < 0) return false;
    var q = state.query.trim().toLowerCase();
    return !q || searchText(c).indexOf(q) >= 0;
  }

  function applyFilters() {
    var shown = 0;
    claims.forEach(function (c) {
      var ok = matches(c);
      cards[c.id].hidden = !ok;
      if (ok) shown++;
    });
    document.getElementById('vt-count').textContent = 'showing ' + shown + ' of ' + claims.length + ' claims' +
      (state.sentence != null ? ' (from output sentence ' + state.sentence + ')' : '');
    return shown;
  }

  // ---- DAG -------------------------------------------------------------------------------
  var nodeEls = {}, edgeEls = [], bandEls = {};
  var TRAIL_ONLY_DEFAULT_ABOVE = 300;  // nodes: past this, draw only the selected claim's trail

  function renderDag() {
    var aside = document.getElementById('vt-dag');
    aside.append(el('h2', { text: 'Generation DAG (nodes read by any claim)' }));
    var legend = el('div', { class: 'legend' });
    [['#cfd8dc', 'checked'], ['#1a5fb4', 'yielded evidence'], ['#2e7d32', 'provenance path'], ['#c62828', 'error stage']].forEach(function (p) {
      var dot = el('i'); dot.style.background = p[0];
      legend.append(el('span', null, dot, p[1]));
    });
    // The node blamed for the error stage: a big dashed red ring, as drawn on the node.
    legend.append(el('span', { id: 'vt-legend-blamed' }, el('i', { class: 'ring' }), 'blamed node (unsupported content entered here)'));
    aside.append(legend);
    aside.append(el('div', { id: 'vt-blamed', class: 'blamed-line', hidden: 'hidden' }));
    var cb = el('input', { type: 'checkbox', id: 'vt-trail-only' });
    state.trailOnly = cb.checked = nodes.length > TRAIL_ONLY_DEFAULT_ABOVE;
    cb.addEventListener('change', function () { state.trailOnly = cb.checked; redraw(); });
    aside.append(el('label', { class: 'note' }, cb, ' draw only the selected claim\'s trail (' + nodes.length + ' nodes in all)'));
    aside.append(el('div', { id: 'vt-dag-canvas', class: 'dag-scroll' }));
    aside.append(el('div', { id: 'vt-node', class: 'box' }));
    nodeHint();
    redraw();
  }

  // The node panel's hint until a node is shown: "Select a claim" only while none is selected.
  function nodeHint() {
    var box = document.getElementById('vt-node');
    box.textContent = '';
    box.append(el('span', { class: 'note', id: 'vt-hint', text: state.selected
      ? 'Click a node to read it.' : 'Select a claim to see its trail; click a node to read it.' }));
  }

  // The selected claim's blamed nodes, named above the drawing.
  function showBlamed(c) {
    var line = document.getElementById('vt-blamed');
    if (!line) return;
    var blamed = c ? blamedOf(c) : [];
    line.textContent = '';
    line.hidden = !blamed.length;
    if (!blamed.length) return;
    line.append(el('span', { text: 'Claim ' + showText(c.id) + ': error stage ' + c.error_stages.join(', ') +
      ', blamed node' + (blamed.length > 1 ? 's ' : ' ') }),
      el('span', { class: 'nid', text: showIds(blamed, ', ') }));
  }

  function blamedOf(c) {
    return Object.keys(trailOf(c).err).sort(function (a, b) { return a.localeCompare(b, 'en', { numeric: true }); });
  }

  // Short node labels that tell nodes apart: a path's folders are dropped when the file names
  // alone are distinct ("a.txt#0", not "examples/chec…" for every source), and a label too long
  // for its column keeps its end ("…long-name#12"). The full id is the node's tooltip.
  function nodeLabels(list) {
    var base = {}, seen = {}, clash = false;
    list.forEach(function (n) {
      var id = showText(n.id), cut = id.lastIndexOf('/');
      base[n.id] = cut >= 0 && cut < id.length - 1 ? id.slice(cut + 1) : id;
      if (seen[base[n.id]] && seen[base[n.id]] !== n.id) clash = true;
      seen[base[n.id]] = n.id;
    });
    var out = {};
    list.forEach(function (n) { out[n.id] = clash ? showText(n.id) : base[n.id]; });
    return out;
  }
  function fitLabel(textEl, full, maxWidth) {
    textEl.textContent = full;
    if (textEl.getComputedTextLength() <= maxWidth) return;
    for (var keep = full.length - 1; keep > 1; keep--) {
      textEl.textContent = '\u2026' + full.slice(full.length - keep);
      if (textEl.getComputedTextLength() <= maxWidth) return;
    }
  }

  // Draw the DAG (all touched nodes, or the selected claim's trail) and re-apply the highlight.
  function redraw() {
    var c = state.selected ? claimById[state.selected] : null;
    var list = nodes;
    if (state.trailOnly && c) {
      var t = trailOf(c);
      list = nodes.filter(function (n) { return t.checked[n.id] || n.id === dag.terminal; });
    }
    drawDag(list);
    highlight(c);
    if (state.focusNode && nodeEls[state.focusNode]) nodeEls[state.focusNode].classList.add('focus');
  }

  // Layout: one column per stage, sources on the left. A node is a circle with its label above
  // and to the right; edges are drawn at the height of the circles, never of the labels: an edge
  // leaves its source to the right, turns in the gap at the column's right edge ("gutter"),
  // runs to its target's height and enters the target from the left. An edge that skips stages
  // climbs to a channel above every node, crosses there and comes down in the gutter left of its
  // target, so no edge runs through a label (tests/test_html_trail_view.py checks the geometry).
  var DAG_LAYOUT = { colW: 170, rowH: 32, padTop: 44, padLeft: 14, r: 6, channel: 30 };
  function drawDag(list) {
    var L = DAG_LAYOUT;
    var canvas = document.getElementById('vt-dag-canvas');
    canvas.textContent = '';
    nodeEls = {}; edgeEls = []; bandEls = {};
    var stages = {};
    list.forEach(function (n) { (stages[n.stage] = stages[n.stage] || []).push(n); });
    var stageKeys = Object.keys(stages).map(Number).sort(function (a, b) { return a - b; });
    var tallest = 0;
    stageKeys.forEach(function (k) {
      stages[k].sort(function (a, b) { return a.id.localeCompare(b.id, 'en', { numeric: true }); });
      tallest = Math.max(tallest, stages[k].length);
    });
    var W = L.padLeft * 2 + stageKeys.length * L.colW, H = L.padTop + tallest * L.rowH + 10;
    var g = sv('svg', { class: 'dag', id: 'vt-dag-svg', width: W, height: H, viewBox: '0 0 ' + W + ' ' + H });
    canvas.append(g);  // in the document first: labels are measured to fit their column
    var pos = {}, colOf = {};
    stageKeys.forEach(function (k, ci) {
      var x0 = L.padLeft + ci * L.colW;
      var band = sv('rect', { class: 'band', x: x0, y: 0, width: L.colW, height: H, 'data-stage': k });
      bandEls[k] = band;
      g.append(band);
      var lab = sv('text', { class: 'stage-label', x: x0 + 8, y: 14 }); lab.textContent = 'stage ' + k;
      g.append(lab);
      var col = stages[k];
      var offset = (tallest - col.length) * L.rowH / 2;
      col.forEach(function (n, ri) {
        pos[n.id] = { x: x0 + 14, y: L.padTop + offset + ri * L.rowH + L.rowH / 2 };
        colOf[n.id] = ci;
      });
    });
    function gutter(ci) { return L.padLeft + (ci + 1) * L.colW - 10; }
    var edgeLayer = sv('g'), nodeLayer = sv('g');
    g.append(edgeLayer, nodeLayer);
    list.forEach(function (n) {
      n.sources.forEach(function (s) {
        if (!pos[s]) return;
        var a = pos[s], b = pos[n.id], ca = colOf[s], cb = colOf[n.id];
        var d = 'M' + (a.x + L.r) + ',' + a.y;
        if (cb - ca <= 1) {
          d += ' H' + gutter(ca) + ' V' + b.y;
        } else {
          d += ' H' + gutter(ca) + ' V' + L.channel + ' H' + gutter(cb - 1) + ' V' + b.y;
        }
        d += ' H' + (b.x - L.r);
        var p = sv('path', { class: 'edge', d: d, 'data-from': s, 'data-to': n.id });
        edgeEls.push(p);
        edgeLayer.append(p);
      });
    });
    var labels = nodeLabels(list);
    var labelX = L.r + 7;  // clear of the blamed node's bigger ring (r + 4, dashed)
    var maxLabel = L.colW - 14 - labelX - 18;  // from the label's start to short of the gutter
    list.forEach(function (n) {
      var p = pos[n.id];
      var grp = sv('g', { class: 'node' + (n.id === dag.terminal ? ' terminal' : ''), 'data-node-id': n.id,
        transform: 'translate(' + p.x + ',' + p.y + ')' });
      var t = sv('title'); t.textContent = showText(n.id) + ' (stage ' + n.stage + (n.is_root ? ', source' : '') + ')';
      grp.append(t, sv('circle', { r: L.r }));
      var label = sv('text', { class: 'node-label', x: labelX, y: -L.r - 3 });
      grp.append(label);
      nodeLayer.append(grp);
      fitLabel(label, labels[n.id], maxLabel);
      grp.addEventListener('click', function () { showNode(n.id); });
      nodeEls[n.id] = grp;
    });
  }

  function trailOf(c) {
    var t = { checked: {}, evidence: {}, prov: {}, provEdges: {}, err: {} };
    (c.iterations || []).forEach(function (it) {
      it.nodes_checked.forEach(function (n) { t.checked[n] = 1; });
      it.carried_roots.forEach(function (n) { t.checked[n] = 1; });
      it.nodes_with_evidence.forEach(function (n) { t.evidence[n] = 1; });
    });
    (c.provenance || []).forEach(function (path) {
      var prev = dag.terminal;
      path.forEach(function (n) { t.prov[n] = 1; t.provEdges[n + '>' + prev] = 1; prev = n; });
    });
    if (c.error_stage_status === 'identified') {
      // docs/method.md#provenance-and-error-stages: the non-root evidence nodes of the last Fully Supported iteration, or the terminal.
      var lastFs = null;
      (c.iterations || []).forEach(function (it) { if (it.verdict === 'Fully Supported') lastFs = it; });
      var stagesSet = {};
      c.error_stages.forEach(function (s) { stagesSet[s] = 1; });
      if (lastFs) {
        lastFs.nodes_with_evidence.forEach(function (n) {
          var nd = nodeById[n];
          if (nd && !nd.is_root && stagesSet[nd.stage]) t.err[n] = 1;
        });
      } else {
        t.err[dag.terminal] = 1;
      }
    }
    return t;
  }

  function highlight(c) {
    var t = c ? trailOf(c) : null;
    Object.keys(nodeEls).forEach(function (id) {
      var g = nodeEls[id], cl = g.classList;
      cl.toggle('checked', !!(t && t.checked[id]));
      cl.toggle('evidence', !!(t && t.evidence[id]));
      cl.toggle('prov', !!(t && t.prov[id]));
      cl.toggle('errnode', !!(t && t.err[id]));
      // The blamed node's ring is the biggest mark on the drawing.
      g.querySelector('circle').setAttribute('r', t && t.err[id] ? DAG_LAYOUT.r + 4 : DAG_LAYOUT.r);
      cl.toggle('dim', !!(t && !t.checked[id] && id !== dag.terminal));
    });
    edgeEls.forEach(function (e) {
      e.classList.toggle('prov', !!(t && t.provEdges[e.getAttribute('data-from') + '>' + e.getAttribute('data-to')]));
    });
    Object.keys(bandEls).forEach(function (k) {
      bandEls[k].classList.toggle('err', !!(c && c.error_stage_status === 'identified' && c.error_stages.indexOf(Number(k)) >= 0));
    });
    var off = c && c.offsets;
    var tspans = dag.terminal_spans || [];
    var sents = dag.terminal_sentences || [];
    sentenceEls.forEach(function (sp, i) {
      sp.classList.toggle('hl', !!(c && (c.sentence_indices || []).indexOf(i) >= 0));
      sp.classList.toggle('unsup', !!(off && (off.unsupported || []).some(function (u) { return u.sentence_index === i; })));
      // A claim found as written: mark its exact span inside the sentence, when the sentence as
      // shown has the length of its slice of the output (a joined line break keeps positions).
      var ts = tspans[i], ranges = [];
      if (off && off.verbatim && ts && ts.end_utf16 - ts.start_utf16 === String(sents[i]).length) {
        (off.spans || []).forEach(function (s) {
          if (s.sentence_index === i) ranges.push([s.start_utf16 - ts.start_utf16, s.end_utf16 - ts.start_utf16]);
        });
      }
      markedText(sp, String(sents[i]), ranges, 'claim-span');
    });
    showBlamed(c);
  }

  // Show a node's details and bring it into view in the DAG panel (after the click selected the
  // claim, so a trail-only drawing already contains it).
  function focusNode(id) {
    setTimeout(function () {
      showNode(id);
      var g = nodeEls[id];
      if (g && g.scrollIntoView) g.scrollIntoView({ block: 'center', inline: 'nearest' });
    }, 0);
  }

  function showNode(id) {
    var n = nodeById[id];
    var box = document.getElementById('vt-node');
    box.textContent = '';
    Object.keys(nodeEls).forEach(function (k) { nodeEls[k].classList.toggle('focus', k === id); });
    state.focusNode = id;
    if (!n) return;
    box.append(el('h3', null, el('span', { class: 'nid', text: showText(n.id) }), 'stage ' + n.stage + (n.is_root ? ' \u00b7 source text' : '') +
      ' \u00b7 ' + n.n_sources + ' sources'));
    var c = state.selected ? claimById[state.selected] : null;
    // The selected claim's evidence sentences in this node, marked where the preview shows them.
    var pv = el('div', { class: 'preview' });
    var evRanges = ((c && c.offsets && c.offsets.evidence) || [])
      .filter(function (e) { return e.node_id === id; })
      .map(function (e) { return [e.start_utf16, e.end_utf16]; });
    markedText(pv, String(n.preview || ''), evRanges, 'ev-span');
    if (String(n.preview || '').length >= 300) pv.append(document.createTextNode(' \u2026'));
    box.append(pv);
    if (c) {
      var ul = el('ul', { class: 'ev' });
      (c.iterations || []).forEach(function (it) {
        it.evidence.forEach(function (e) {
          if (e.node_id === id) ul.append(el('li', null, el('span', { class: 'nid', text: 'iteration ' + it.index + ' #' + e.sentence_index }), el('q', { text: e.text })));
        });
      });
      if (ul.childNodes.length) box.append(el('h4', { text: 'Evidence for ' + showText(c.id) }), ul);
    }
  }

  // ---- selection -------------------------------------------------------------------------
  function select(id) {
    var c = claimById[id] || null;
    state.selected = c ? id : null;
    Object.keys(cards).forEach(function (k) {
      var on = k === state.selected;
      cards[k].classList.toggle('selected', on);
      var d = cards[k].querySelector('details');
      if (d && on) d.open = true;
    });
    if (state.trailOnly) redraw(); else highlight(c);
    try { history.replaceState(null, '', c ? '#claim=' + encodeURIComponent(id) : '#'); } catch (e) { /* file:// in some browsers */ }
    if (state.focusNode) showNode(state.focusNode); else nodeHint();
    return !!c;
  }

  // ---- other detectors: extension point ----------------------------------------------------
  // >>> EXTRA SECTIONS HOOK >>>
  // Reports may carry results of other detectors under top-level keys. Each entry below renders
  // DATA[key] into its own <section> in #vt-extras. To give a detector a dedicated view, replace
  // its `render` with a function (value, sectionElement) -> void that builds DOM with el()/sv()
  // and textContent only. Python side: veritrail.html.EXTRA_SECTION_KEYS lists the same keys.
  var EXTRA_SECTIONS = [
    { key: 'g2l', title: 'G2LDetect: global-to-local paths', render: renderG2L },
    { key: 'sirg', title: 'SIRG: internal reasoning graph', render: renderSirg }
  ];
  // <<< EXTRA SECTIONS HOOK <<<

  // G2LDetect (detectors/g2l/report.py g2l_report): status, then the failing root-to-leaf paths.
  function renderG2L(v, section) {
    if (!v || !Array.isArray(v.paths)) { renderJsonTree(v, section); return; }
    var cls = v.status === 'passed' ? 'fs' : v.status === 'failed' ? 'nfs' : 'err';
    var failing = v.paths.filter(function (p) { return p.supported === false; });
    section.append(el('div', { class: 'head' },
      el('span', { class: 'badge ' + cls, text: String(v.status) }),
      ' ' + failing.length + ' of ' + v.paths.length + ' paths not supported' +
      (v.score != null ? ' \u00b7 score ' + Number(v.score).toFixed(2) : '') +
      (v.model ? ' \u00b7 model ' + v.model : '')));
    if (v.tree_error) section.append(el('div', { class: 'error-text', text: 'tree: ' + v.tree_error }));
    function pathItem(p) {
      var li = el('li', { class: 'g2l-path ' + (p.supported === false ? 'nfs' : p.supported ? 'fs' : 'err') },
        el('span', { class: 'path', text: showIds(p.path, ' \u203a ') }));
      if (p.reason) li.append(el('div', { class: 'note', text: p.reason }));
      if (p.chunk != null) li.append(el('div', { class: 'note', text: 'reference chunk ' + p.chunk }));
      if (p.error) li.append(el('div', { class: 'error-text', text: p.error }));
      return li;
    }
    if (failing.length) {
      var ol = el('ol', { class: 'g2l-failing' });
      failing.forEach(function (p) { ol.append(pathItem(p)); });
      section.append(el('h4', { text: 'Failing paths' }), ol);
    }
    var all = el('ol', { class: 'g2l-all' });
    v.paths.forEach(function (p) { all.append(pathItem(p)); });
    section.append(el('details', null, el('summary', { text: 'All paths (' + v.paths.length + ')' }), all));
  }

  // SIRG (sirg/detector.py Detection.to_dict): verdict, response fragments with their
  // probability, and each flagged fragment's strongest incoming edges in the reasoning graph.
  function renderSirg(v, section) {
    if (!v || !Array.isArray(v.fragments)) { renderJsonTree(v, section); return; }
    var verdict = v.flagged === true ? 'hallucination' : v.flagged === false ? 'no hallucination' : 'undecided';
    section.append(el('div', { class: 'head' },
      el('span', { class: 'badge ' + (v.flagged === true ? 'nfs' : v.flagged === false ? 'fs' : 'err'), text: verdict }),
      (v.flagged_share != null ? ' flagged share ' + Number(v.flagged_share).toFixed(2) : '') +
      (v.method ? ' \u00b7 ' + v.method : '') + (v.selection ? ' \u00b7 edges ' + v.selection + (v.k != null ? ' k=' + v.k : '') : '')));
    var graph = v.graph || {};
    var textOf = {};
    (graph.nodes || []).forEach(function (n) { textOf[n.id] = n; });
    var incoming = {};
    (graph.edges || []).forEach(function (e) { (incoming[e.target] = incoming[e.target] || []).push(e); });
    var table = el('table', { class: 'kv sirg-fragments' },
      el('tr', null, el('th', { text: 'fragment' }), el('th', { text: 'text' }), el('th', { text: 'p(hallucinated)' })));
    v.fragments.forEach(function (f) {
      var row = el('tr', { class: f.flagged ? 'flagged' : '' },
        el('td', { class: 'mono', text: String(f.node) }),
        el('td', null, f.text),
        el('td', { text: f.probability == null ? '-' : Number(f.probability).toFixed(2) }));
      table.append(row);
      var edges = (incoming[f.node] || []).slice().sort(function (a, b) { return b.weight - a.weight; }).slice(0, 5);
      if (f.flagged && edges.length) {
        var ul = el('ul', { class: 'ev' });
        edges.forEach(function (e) {
          var src = textOf[e.source] || {};
          ul.append(el('li', null, el('span', { class: 'nid', text: (src.kind || '?') + ' ' + showText(e.source) + ' \u00b7 ' + Number(e.weight).toFixed(3) }), src.text || ''));
        });
        table.append(el('tr', { class: 'sirg-edges' }, el('td'), el('td', { colspan: 2 }, el('div', { class: 'note', text: 'strongest sources:' }), ul)));
      }
    });
    section.append(table);
  }

  function renderJsonTree(value, section) {
    function walk(v) {
      if (v === null || typeof v !== 'object') return document.createTextNode(showText(JSON.stringify(v)));
      var ul = el('ul');
      Object.keys(v).forEach(function (k) {
        var child = v[k];
        var li = el('li', null, el('span', { class: 'k', text: Array.isArray(v) ? '[' + k + '] ' : k + ': ' }));
        li.append(walk(child));
        ul.append(li);
      });
      return ul;
    }
    section.append(el('div', { class: 'jtree' }, walk(value)));
  }

  function renderExtras() {
    var host = document.getElementById('vt-extras');
    EXTRA_SECTIONS.forEach(function (x) {
      if (DATA[x.key] == null) return;
      var sec = el('section', { class: 'box extra', 'data-extra': x.key }, el('h2', { text: x.title }));
      x.render(DATA[x.key], sec);
      host.append(sec);
    });
  }

  // ---- start -----------------------------------------------------------------------------
  renderHeader();
  renderSummary();
  renderTerminal();
  renderControls();
  renderClaims();
  renderDag();
  renderExtras();
  applyFilters();
  var m = /^#claim=(.+)$/.exec(location.hash || '');
  var initial = m ? decodeURIComponent(m[1]) : null;
  if (initial && claimById[initial]) select(initial);

  // A small API for scripted use (tests, embedding): select a claim, set filters.
  window.veritrail = {
    data: DATA,
    select: select,
    setVerdict: function (v, on) {
      state.verdicts[v] = !!on;
      document.querySelectorAll('#vt-verdict-filter input').forEach(function (cb) {
        if (cb.getAttribute('data-verdict') === v) cb.checked = !!on;
      });
      return applyFilters();
    },
    setStage: function (s) { state.stage = String(s); document.getElementById('vt-stage-filter').value = state.stage; return applyFilters(); },
    search: function (q) { state.query = q; document.getElementById('vt-search').value = q; return applyFilters(); },
    showNode: showNode,
    setTrailOnly: function (on) { state.trailOnly = !!on; document.getElementById('vt-trail-only').checked = !!on; redraw(); }
  };
  document.documentElement.setAttribute('data-vt-ready', '1');
})();
