// The MCP Apps side of the request-context view: speaks JSON-RPC over postMessage with the
// host (ui/initialize, then ui/notifications/initialized), waits for the tool's input and
// result, then asks the broker (through the host) for the full view with the app-only tool.
(function () {
  "use strict";
  var PROTOCOL_VERSION = "2026-01-26";
  var VIEW_TOOL = "ui_request_context";
  var root = document.getElementById("view");
  var nextId = 1;
  var pending = {};

  function post(message) { window.parent.postMessage(message, "*"); }

  function request(method, params) {
    var id = nextId++;
    post({ jsonrpc: "2.0", id: id, method: method, params: params });
    return new Promise(function (resolve, reject) {
      pending[id] = { resolve: resolve, reject: reject };
      setTimeout(function () {
        if (pending[id]) { delete pending[id]; reject(new Error(method + " timed out")); }
      }, 15000);
    });
  }

  function notify(method, params) { post({ jsonrpc: "2.0", method: method, params: params || {} }); }

  function reportSize() {
    var rect = document.documentElement.getBoundingClientRect();
    notify("ui/notifications/size-changed", { width: Math.ceil(rect.width), height: Math.ceil(rect.height) });
  }

  function textOf(result) {
    return (result.content || []).filter(function (c) { return c.type === "text"; })
      .map(function (c) { return c.text; }).join("\n");
  }

  function showResult(result) {
    if (result.isError) {
      ContextView.error(root, textOf(result) || "The tool call failed.");
      reportSize();
      return;
    }
    var sc = result.structuredContent;
    if (!sc || !sc.session_id || !sc.request_id) {
      ContextView.empty(root, "This result carries no request context.");
      reportSize();
      return;
    }
    ContextView.loading(root);
    request("tools/call", { name: VIEW_TOOL, arguments: { session_id: sc.session_id, request_id: sc.request_id } })
      .then(function (full) {
        if (full.isError || !full.structuredContent) throw new Error(textOf(full) || "no view");
        ContextView.render(root, full.structuredContent);
      })
      .catch(function () { ContextView.render(root, ContextView.fromResult(sc)); })
      .then(reportSize);
  }

  function answer(message, result) { post({ jsonrpc: "2.0", id: message.id, result: result }); }

  window.addEventListener("message", function (event) {
    if (event.source !== window.parent) return;
    var msg = event.data;
    if (!msg || msg.jsonrpc !== "2.0") return;
    if (msg.id !== undefined && msg.method === undefined) {
      var waiter = pending[msg.id];
      if (!waiter) return;
      delete pending[msg.id];
      if (msg.error) waiter.reject(new Error(msg.error.message || "error"));
      else waiter.resolve(msg.result);
      return;
    }
    switch (msg.method) {
      case "ui/notifications/tool-input":
      case "ui/notifications/tool-input-partial":
        ContextView.loading(root, "Choosing the context for this message…");
        break;
      case "ui/notifications/tool-result":
        showResult(msg.params || {});
        break;
      case "ui/notifications/tool-cancelled":
        ContextView.empty(root, "The request was cancelled.");
        break;
      case "ui/resource-teardown":
      case "ping":
        if (msg.id !== undefined) answer(msg, {});
        break;
      default:
        if (msg.id !== undefined) {
          post({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "method not found: " + msg.method } });
        }
    }
  });

  ContextView.loading(root, "Waiting for the request context…");
  request("ui/initialize", {
    protocolVersion: PROTOCOL_VERSION,
    appInfo: { name: "context-broker-request-context", version: "1" },
    appCapabilities: {}
  }).then(function () {
    notify("ui/notifications/initialized", {});
    reportSize();
  }).catch(function (err) {
    ContextView.error(root, "The host did not answer ui/initialize: " + err.message);
  });
})();
