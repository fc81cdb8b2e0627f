// netpeer's console: the graph (cytoscape, when installed) and live updates
// from the server's event stream (fed by the Watch API). No framework.
"use strict";

(function () {
  var page = document.body.getAttribute("data-page");
  var NS = "netpeer";

  function onExpired() { window.location.assign("/signin?m=expired"); }

  function stream(url, handlers) {
    var source = new EventSource(url);
    source.addEventListener("expired", function () { source.close(); onExpired(); });
    Object.keys(handlers).forEach(function (kind) {
      source.addEventListener(kind, function (m) { handlers[kind](JSON.parse(m.data)); });
    });
    window[NS + "Stream"] = source;
    return source;
  }

  function text(el, value) { if (el) { el.textContent = value == null ? "" : String(value); } }

  // ---------------------------------------------------------------- the graph
  var STYLE = [
    { selector: "node", style: { "label": "data(label)", "font-size": 10, "background-color": "#3b6ea5",
                                 "color": "#222", "text-valign": "bottom", "width": 18, "height": 18 } },
    { selector: "node.remote", style: { "background-color": "#999", "shape": "round-rectangle" } },
    { selector: "node.group", style: { "background-color": "#f3f0e6", "border-color": "#b9a66b",
                                       "border-style": "dashed", "border-width": 1, "text-valign": "top",
                                       "font-size": 11, "shape": "round-rectangle" } },
    { selector: "node.remote-site", style: { "background-color": "#e8eef6", "border-color": "#6b8bb9" } },
    { selector: "edge", style: { "label": "data(label)", "font-size": 8, "width": 2, "curve-style": "bezier",
                                 "target-arrow-shape": "triangle", "line-color": "#c08a00",
                                 "target-arrow-color": "#c08a00", "text-rotation": "none",
                                 "text-background-color": "#fff", "text-background-opacity": 0.85 } },
    { selector: "edge.bound", style: { "line-color": "#2a8a3a", "target-arrow-color": "#2a8a3a" } },
    { selector: "edge.failed", style: { "line-color": "#b3261e", "target-arrow-color": "#b3261e",
                                        "line-style": "dashed" } },
    { selector: ":selected", style: { "border-width": 3, "border-color": "#000" } }
  ];

  function layoutFor(count) {
    // Layers, the namespace's own networks first and the networks they peer with below (grouped by
    // namespace and site), so that a picture drawn twice looks the same; concentric (no iterations)
    // beyond a few hundred elements.
    return count <= 150 ? { name: "breadthfirst", directed: true, roots: "node.own", animate: false,
                            spacingFactor: 1.6, avoidOverlap: true, padding: 40 }
                        : { name: "concentric", animate: false, minNodeSpacing: 8 };
  }

  function drawGraph() {
    var data = JSON.parse(document.getElementById("graph-data").textContent);
    var box = document.getElementById("graph");
    window.netpeerGraph = { ready: false, namespace: data.namespace, cy: null };
    if (typeof window.cytoscape !== "function") {
      box.classList.add("missing");
      text(box, "The graph library is not installed: the tables show every peering.");
      window.netpeerGraph.ready = true;
      return null;
    }
    if (data.elements.length === 0) {
      box.classList.add("empty");
      text(box, "No peerings yet.");
    }
    var cy = window.cytoscape({ container: box, elements: data.elements, style: STYLE,
                                layout: layoutFor(data.elements.length), maxZoom: 2 });
    window.netpeerGraph.cy = cy;
    cy.ready(function () {
      window.netpeerGraph.ready = true;
      window.netpeerGraph.drawnAt = performance.now();
    });
    cy.on("tap", "edge", function (evt) {
      var id = evt.target.id().slice(2).split("/");
      window.location.assign("/peering?namespace=" + encodeURIComponent(data.namespace) + "&network=" +
                             encodeURIComponent(id[0]) + "&name=" + encodeURIComponent(id[1]));
    });
    cy.on("tap", "node", function (evt) { window.netpeerGraph.tapped = evt.target.id(); });
    return cy;
  }

  function applyChange(cy, change) {
    if (change.kind !== "peering") { return; }
    var key = change.network + "/" + change.name;
    var row = document.querySelector('tr[data-peering="' + CSS.escape(key) + '"]');
    if (change.type === "Deleted") {
      if (row) { row.remove(); }
      if (cy) { cy.remove(cy.getElementById("e:" + key)); }
      return;
    }
    var p = change.peering || {};
    if (!row) {
      row = document.createElement("tr");
      row.className = "peering";
      row.setAttribute("data-peering", key);
      ["network", "name", "remote", "phase", "dataplane", "reason"].forEach(function (c) {
        var td = document.createElement("td");
        td.className = c;
        row.appendChild(td);
      });
      var link = document.createElement("a");
      link.href = "/peering?namespace=" + encodeURIComponent(change.namespace) + "&network=" +
                  encodeURIComponent(change.network) + "&name=" + encodeURIComponent(change.name);
      text(link, change.name);
      row.children[1].appendChild(link);
      text(row.children[0], change.network);
      text(row.children[2], (p.remote_site ? p.remote_site + ":" : "") + p.remote_namespace + "/" + p.remote_network);
      document.querySelector("#peerings tbody").appendChild(row);
    }
    var phase = row.querySelector(".phase") || row.children[3];
    text(phase, change.phase);
    phase.className = "phase " + String(change.phase).toLowerCase();
    text(row.querySelector(".dataplane") || row.children[4], change.dataplane);
    text(row.querySelector(".reason") || row.children[5], change.reason);
    if (!cy) { return; }
    var edge = cy.getElementById("e:" + key);
    var label = change.phase + (change.dataplane ? " · " + change.dataplane : "");
    if (edge.empty()) {
      var ns = window.netpeerGraph.namespace;
      var remoteNs = p.remote_namespace || ns, site = p.remote_site || "";
      var source = "n:" + change.network, target;
      if (cy.getElementById(source).empty()) {
        cy.add({ data: { id: source, label: change.network }, classes: "own" });
      }
      if (remoteNs === ns && !site) {
        target = "n:" + p.remote_network;
        if (cy.getElementById(target).empty()) {
          cy.add({ data: { id: target, label: p.remote_network }, classes: "own" });
        }
      } else {
        var group = "g:" + site + "/" + remoteNs;
        if (cy.getElementById(group).empty()) {
          cy.add({ data: { id: group, label: site ? remoteNs + " @ " + site : remoteNs },
                   classes: site ? "group remote-site" : "group" });
        }
        target = "r:" + site + "/" + remoteNs + "/" + p.remote_network;
        if (cy.getElementById(target).empty()) {
          cy.add({ data: { id: target, label: p.remote_network, parent: group }, classes: "remote" });
        }
      }
      edge = cy.add({ data: { id: "e:" + key, source: source, target: target } });
      cy.layout(layoutFor(cy.elements().length)).run();
    }
    edge.data({ phase: change.phase, dataplane: change.dataplane || "", label: label });
    edge.classes(String(change.phase).toLowerCase());
  }

  function note(message) {
    var p = document.getElementById("live-note");
    if (!p) {
      p = document.createElement("p");
      p.id = "live-note";
      p.className = "error";
      document.querySelector("main").prepend(p);
    }
    text(p, message);
  }

  if (page === "networks" && document.getElementById("graph-data")) {
    var cy = drawGraph();
    var ns = window.netpeerGraph.namespace;
    stream("/events?namespace=" + encodeURIComponent(ns), {
      change: function (c) { applyChange(cy, c); },
      error: function (e) { note(e.message); }
    });
  }

  function requestRow(table, r) {
    var row = document.createElement("tr");
    row.className = "request";
    row.setAttribute("data-request", r.id);
    var from = (r.requester_site ? r.requester_site + ":" : "") + r.requester_namespace + "/" + r.requester_network;
    var cells = [r.network, from + " (" + r.requester_peering + ")",
                 (r.prefixes || []).join(", "), r.create_time, r.expires_at || ""];
    cells.forEach(function (v) { var td = document.createElement("td"); text(td, v); row.appendChild(td); });
    ["accept", "dismiss"].forEach(function (action) {
      var td = document.createElement("td"), form = document.createElement("form");
      form.method = "post";
      form.action = "/inbox/" + action;
      form.className = action;
      var fields = { csrf: table.dataset.csrf, namespace: table.dataset.namespace, network: r.network,
                     request: r.id };
      Object.keys(fields).forEach(function (k) {
        var input = document.createElement("input");
        input.type = "hidden"; input.name = k; input.value = fields[k];
        form.appendChild(input);
      });
      if (action === "accept") {
        var name = document.createElement("input");
        name.name = "name"; name.required = true;
        name.value = ("from-" + r.requester_namespace + "-" + r.requester_network).slice(0, 63).replace(/[-.]+$/, "");
        form.appendChild(name);
      }
      var button = document.createElement("button");
      button.type = "submit";
      text(button, action === "accept" ? "Accept" : "Dismiss");
      form.appendChild(button);
      td.appendChild(form);
      row.appendChild(td);
    });
    return row;
  }

  if (page === "inbox") {
    var table = document.getElementById("requests");
    stream("/events?namespace=" + encodeURIComponent(table.dataset.namespace), {
      change: function (c) {
        if (c.kind !== "peering_request") { return; }
        var old = table.querySelector('tr[data-request="' + CSS.escape(c.name) + '"]');
        if (c.type === "Deleted") {
          if (old) { old.remove(); }
        } else if (c.peering_request) {
          var row = requestRow(table, c.peering_request);
          if (old) { old.replaceWith(row); } else { table.tBodies[0].appendChild(row); }
        }
        document.getElementById("no-requests").hidden = table.tBodies[0].rows.length > 0;
      },
      error: function (e) { note(e.message); }
    });
  }

  if (page === "peering") {
    var list = document.getElementById("history");
    var url = "/events?since=0&namespace=" + encodeURIComponent(list.dataset.namespace) + "&network=" +
              encodeURIComponent(list.dataset.network);
    stream(url, {
      change: function (c) {
        if (c.kind !== "peering" || c.name !== list.dataset.name) { return; }
        var li = document.createElement("li");
        li.className = "event " + String(c.type).toLowerCase();
        text(li, c.time + "  " + c.type + "  " + (c.phase || "") + (c.dataplane ? " · " + c.dataplane : "") +
                 (c.reason ? "  (" + c.reason + ")" : ""));
        list.appendChild(li);
        text(document.getElementById("f-phase"), c.phase);
        text(document.getElementById("f-dataplane"), c.dataplane);
        text(document.getElementById("f-reason"), c.reason);
      },
      note: function (n) { note(n.message); },
      error: function (e) { note(e.message); }
    });
  }
})();
