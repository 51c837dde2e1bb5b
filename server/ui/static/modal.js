// The "View Context" modal: renders a request view (see server/ui/view.py RequestView) or a
// bare tool result's items into a container. Shared by the MCP App and the web pages.
(function () {
  "use strict";
  var MODES = { always: "Always", manual: "Manual", agent: "Agent" };
  var COLUMNS = [["rules", "Rules"], ["references", "References"], ["tools", "Tools"]];
  var REACH = { server: "another tool of a server chosen", rank: "next ranked", step: "best of a step" };

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function itemNode(item) {
    var li = el("li", "cb-item");
    li.dataset.key = item.key;
    li.dataset.mode = item.include_mode;
    if (item.description) li.title = item.description;
    var line = el("div", "cb-line");
    line.appendChild(el("span", "cb-label", item.label));
    line.appendChild(el("span", "cb-name", item.name));
    var badge = el("span", "cb-badge cb-badge-" + item.include_mode, MODES[item.include_mode] || item.include_mode);
    if (item.include_mode === "agent" && typeof item.similarity_score === "number") {
      badge.appendChild(el("span", "cb-score", item.similarity_score.toFixed(2)));
    }
    line.appendChild(badge);
    li.appendChild(line);
    if (item.intent) li.appendChild(el("div", "cb-why", "for step: " + item.intent));
    if (item.via === "search") li.appendChild(el("div", "cb-why", "found by a later search"));
    if (REACH[item.via] && !item.intent) li.appendChild(el("div", "cb-why", REACH[item.via]));
    if (item.via === "conversation") {
      li.appendChild(el("div", "cb-why", "carried from the conversation" + (item.turn ? " (turn " + item.turn + ")" : "")));
    }
    if (item.description) li.appendChild(el("div", "cb-desc", item.description));
    else if (item.in_catalog === false) li.appendChild(el("div", "cb-desc cb-gone", "no longer in the catalog"));
    return li;
  }

  function columnNode(key, title, items) {
    var col = el("section", "cb-column");
    col.dataset.column = key;
    var head = el("h3", null, title);
    head.appendChild(el("span", "cb-count", String(items.length)));
    col.appendChild(head);
    if (!items.length) {
      col.appendChild(el("div", "cb-empty", "No " + title.toLowerCase() + " in this request"));
      return col;
    }
    var ul = el("ul", "cb-items");
    items.forEach(function (item) { ul.appendChild(itemNode(item)); });
    col.appendChild(ul);
    return col;
  }

  // The programs run with run_code after this request: code, the calls made, the answer.
  function runsNode(runs) {
    var box = el("section", "cb-reach");
    box.dataset.role = "code-runs";
    var title = el("h3", null, "Code runs after this request");
    title.appendChild(el("span", "cb-count", String(runs.length)));
    box.appendChild(title);
    runs.forEach(function (run) {
      var item = el("div", "cb-run");
      item.dataset.state = run.is_error ? "failed" : "answered";
      item.appendChild(el("pre", "cb-code", run.code));
      var calls = el("ul", "cb-items");
      run.calls.forEach(function (c) {
        calls.appendChild(el("li", "cb-call", c.server + "/" + c.tool + (c.ok ? "" : " (failed)")));
      });
      item.appendChild(calls);
      item.appendChild(el("div", "cb-desc cb-answer", run.answer));
      box.appendChild(item);
    });
    return box;
  }

  function render(container, view) {
    container.textContent = "";
    var root = el("div", "cb-modal");
    root.dataset.state = "ready";
    var header = el("header");
    header.appendChild(el("h2", null, "Context for this request"));
    var meta = [view.request_id, view.timestamp, view.summary];
    if (view.search_mode) meta.push("search: " + view.search_mode);
    header.appendChild(el("div", "cb-meta", meta.filter(Boolean).join(" · ")));
    if (view.message) header.appendChild(el("div", "cb-message", view.message));
    if (view.intents && view.intents.length) {
      var plan = el("ol", "cb-plan");
      plan.dataset.role = "plan";
      view.intents.forEach(function (step) { plan.appendChild(el("li", null, step)); });
      header.appendChild(el("div", "cb-plan-title", "Plan searched"));
      header.appendChild(plan);
    }
    (view.warnings || []).forEach(function (w) { header.appendChild(el("div", "cb-warning", "⚠ " + w)); });
    root.appendChild(header);
    var grid = el("div", "cb-columns");
    COLUMNS.forEach(function (c) { grid.appendChild(columnNode(c[0], c[1], view.columns[c[0]] || [])); });
    root.appendChild(grid);
    var reach = view.within_reach || [];
    if (reach.length) {
      var more = el("section", "cb-reach");
      more.dataset.role = "within-reach";
      var title = el("h3", null, "More tools within reach (named one line each)");
      title.appendChild(el("span", "cb-count", String(reach.length)));
      more.appendChild(title);
      var list = el("ul", "cb-items");
      reach.forEach(function (item) { list.appendChild(itemNode(item)); });
      more.appendChild(list);
      root.appendChild(more);
    }
    var runs = view.code_runs || [];
    if (runs.length) root.appendChild(runsNode(runs));
    var total = COLUMNS.reduce(function (n, c) { return n + (view.columns[c[0]] || []).length; }, 0);
    if (!total) root.appendChild(el("div", "cb-state", "No rules, references or tools were selected for this message."));
    container.appendChild(root);
  }

  // A view from a build/get_request_context result alone (no descriptions or priorities):
  // used when the host does not let the app call the broker's app-only tool.
  function fromResult(sc) {
    function row(r) {
      return {
        key: r.type === "tool" ? "tool:" + r.server + "/" + r.name : r.type + ":" + r.name,
        type: r.type, name: r.name, server: r.server,
        label: r.type === "tool" ? r.server + "." : "—",
        include_mode: r.include_mode, similarity_score: r.similarity_score,
        intent: r.intent || null, via: r.via || null, turn: r.turn || null,
        description: "", priority: null, in_catalog: true
      };
    }
    var rows = (sc.items || []).map(row);
    function by(type) { return rows.filter(function (r) { return r.type === type; }); }
    var tools = by("tool").sort(function (a, b) {
      return (a.server + "\u0000" + a.name) < (b.server + "\u0000" + b.name) ? -1 : 1;
    });
    return {
      session_id: sc.session_id, request_id: sc.request_id, timestamp: sc.timestamp,
      message: sc.message || "", summary: sc.summary, search_mode: sc.search_mode,
      intents: sc.intents || [],
      warnings: sc.warnings || [],
      columns: { rules: by("rule"), references: by("reference"), tools: tools },
      within_reach: (sc.candidates || []).map(row)
    };
  }

  function state(container, kind, text) {
    container.textContent = "";
    var box = el("div", "cb-state" + (kind === "error" ? " cb-error" : ""));
    box.dataset.state = kind;
    if (kind === "loading") box.appendChild(el("span", "cb-spinner"));
    box.appendChild(document.createTextNode(text));
    container.appendChild(box);
  }

  window.ContextView = {
    render: render,
    fromResult: fromResult,
    loading: function (c, text) { state(c, "loading", text || "Loading the request context…"); },
    error: function (c, text) { state(c, "error", text); },
    empty: function (c, text) { state(c, "empty", text); }
  };
})();
