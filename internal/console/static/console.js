// The console works without this script; it only adds the live event feed
// of a session page. Rows arrive rendered and escaped by the server.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const live = document.getElementById("live");
  const list = document.getElementById("events");
  if (!live || !list || !window.EventSource) return;
  const source = new EventSource(live.dataset.stream);
  const status = document.getElementById("status");
  source.addEventListener("row", (e) => {
    list.insertAdjacentHTML("beforeend", e.data);
    live.textContent = "Live: " + list.children.length + " events.";
    const m = list.lastElementChild.className.match(/session\.status_(\w+)/);
    if (m && status) status.textContent = m[1];
  });
  source.addEventListener("error", () => {
    live.textContent = "Reconnecting to the live feed…";
  });
  source.addEventListener("open", () => {
    live.textContent = "Live: new events appear as they arrive.";
  });
});
