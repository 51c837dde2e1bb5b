// The read-only pages: sessions → a session's turns → "View Context"; the catalog; analytics.
// Hash routes (#/sessions, #/sessions/<id>, #/sessions/<id>/<request>, #/catalog, #/analytics).
(function () {
  "use strict";
  var page = document.getElementById("page");
  var overlay = document.getElementById("overlay");
  var modal = document.getElementById("modal");
  var MODES = { always: "Always", manual: "Manual", agent: "Agent" };

  function el(tag, cls, text) {
    var n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }

  // Each route change starts a new generation; an answer that arrives after the user moved on
  // is dropped, so a slow page can never overwrite the one being shown.
  var generation = 0;

  function api(path) {
    var mine = generation;
    return fetch("api/" + path, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        return r.json().then(function (body) {
          if (mine !== generation) return new Promise(function () {});
          if (!r.ok) throw new Error(body.error || (body.error && body.error.message) || r.statusText);
          return body;
        });
      });
  }

  function table(headers, rows) {
    var t = el("table");
    var head = el("tr");
    headers.forEach(function (h) { head.appendChild(el("th", null, h)); });
    t.appendChild(el("thead")).appendChild(head);
    var body = el("tbody");
    rows.forEach(function (r) { body.appendChild(r); });
    t.appendChild(body);
    return t;
  }

  function cell(row, text, cls) { var td = el("td", cls, text); row.appendChild(td); return td; }

  function loading(title) {
    page.textContent = "";
    page.appendChild(el("h1", null, title));
    var box = el("div");
    ContextView.loading(box, "Loading…");
    page.appendChild(box);
  }

  function failed(err) {
    var box = el("div");
    ContextView.error(box, err.message);
    page.appendChild(box);
  }

  function sessionRow(s) {
    var tr = el("tr");
    var a = el("a", "mono", s.session_id);
    a.href = "#/sessions/" + encodeURIComponent(s.session_id);
    cell(tr, "").appendChild(a);
    cell(tr, s.agent || "—"); cell(tr, s.turns); cell(tr, s.last_turn || "—", "mono"); cell(tr, s.created_at, "mono");
    return tr;
  }

  // The list comes a page at a time (newest first); "Older sessions" appends the next page.
  function sessions() {
    loading("Sessions");
    api("sessions").then(function (first) {
      page.lastChild.remove();
      if (!first.sessions.length) { var b = el("div"); ContextView.empty(b, "No sessions yet."); page.appendChild(b); return; }
      var t = table(["Session", "Agent", "Turns", "Last turn", "Created"], first.sessions.map(sessionRow));
      page.appendChild(t);
      var more = el("button", null, "Older sessions");
      var next = first.next_offset;
      more.hidden = next === null;
      more.addEventListener("click", function () {
        more.disabled = true;
        api("sessions?offset=" + next).then(function (data) {
          data.sessions.forEach(function (s) { t.tBodies[0].appendChild(sessionRow(s)); });
          next = data.next_offset;
          more.hidden = next === null;
          more.disabled = false;
        }).catch(failed);
      });
      page.appendChild(more);
    }).catch(failed);
  }

  function turns(sessionId, requestId) {
    loading("Session " + sessionId);
    api("sessions/" + encodeURIComponent(sessionId) + "/turns").then(function (rows) {
      page.lastChild.remove();
      if (!rows.length) { var b = el("div"); ContextView.empty(b, "No turns in this session yet."); page.appendChild(b); }
      else page.appendChild(table(["Time", "Message", "Selected", ""], rows.map(function (t) {
        var tr = el("tr");
        tr.dataset.request = t.request_id;
        cell(tr, t.timestamp, "mono"); cell(tr, t.message_preview); cell(tr, t.summary);
        var btn = el("button", "view", "View Context");
        btn.type = "button";
        btn.addEventListener("click", function () {
          location.hash = "#/sessions/" + encodeURIComponent(sessionId) + "/" + encodeURIComponent(t.request_id);
        });
        cell(tr, "").appendChild(btn);
        return tr;
      })));
      if (requestId) openModal(sessionId, requestId);
    }).catch(failed);
  }

  function openModal(sessionId, requestId) {
    overlay.hidden = false;
    ContextView.loading(modal);
    api("sessions/" + encodeURIComponent(sessionId) + "/requests/" + encodeURIComponent(requestId))
      .then(function (view) { ContextView.render(modal, view); })
      .catch(function (err) { ContextView.error(modal, err.message); });
  }

  function closeModal() {
    overlay.hidden = true;
    var parts = location.hash.split("/");
    if (parts.length > 3) location.hash = parts.slice(0, 3).join("/");
  }

  function catalog() {
    loading("Catalog");
    api("catalog").then(function (data) {
      page.lastChild.remove();
      var rows = data.items || [];
      if (!rows.length) { var b = el("div"); ContextView.empty(b, "The catalog is empty."); page.appendChild(b); return; }
      page.appendChild(table(["Type", "Item", "Include mode", "Description", "Enabled"], rows.map(function (r) {
        var tr = el("tr");
        tr.dataset.key = r.key;
        cell(tr, r.type); cell(tr, r.type === "tool" ? r.server + "." + r.name : r.name, "mono");
        cell(tr, "").appendChild(el("span", "cb-badge cb-badge-" + r.include_mode, MODES[r.include_mode] || r.include_mode));
        cell(tr, r.description || ""); cell(tr, r.enabled ? "yes" : "no");
        return tr;
      })));
    }).catch(failed);
  }

  function analytics() {
    loading("Analytics");
    api("analytics").then(function (data) {
      page.lastChild.remove();
      var box = el("div", "analytics");
      box.innerHTML = data.html; // drawn and escaped on the server
      page.appendChild(box);
    }).catch(failed);
  }

  function route() {
    generation += 1;
    var parts = (location.hash || "#/sessions").slice(2).split("/").map(decodeURIComponent);
    document.querySelectorAll("nav a").forEach(function (a) { a.classList.toggle("active", a.dataset.nav === parts[0]); });
    if (parts[0] !== "sessions" || parts.length < 3) overlay.hidden = true;
    if (parts[0] === "catalog" || parts[0] === "analytics") page.dataset.session = "";
    if (parts[0] === "catalog") return catalog();
    if (parts[0] === "analytics") return analytics();
    if (parts[0] === "sessions" && parts[1]) {
      if (parts[2] && page.dataset.session === parts[1]) return openModal(parts[1], parts[2]);
      page.dataset.session = parts[1];
      return turns(parts[1], parts[2]);
    }
    page.dataset.session = "";
    return sessions();
  }

  document.getElementById("close").addEventListener("click", closeModal);
  overlay.addEventListener("click", function (e) { if (e.target === overlay) closeModal(); });
  document.addEventListener("keydown", function (e) { if (e.key === "Escape" && !overlay.hidden) closeModal(); });
  window.addEventListener("hashchange", route);
  route();
})();
