// The console works without this script; it only adds the live event feed
// of a session page (dropping the forms of calls answered meanwhile) and
// Copy buttons beside ids (without it, one click on
// an id selects it whole). Rows arrive rendered and escaped by the server.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("button.copy")) {
    button.hidden = false;
    button.addEventListener("click", () => {
      // Select the id first: the person sees what is copied, and can
      // press Ctrl+C where the clipboard is not available to the page.
      const code = button.previousElementSibling;
      const range = document.createRange();
      range.selectNodeContents(code);
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      const said = (text) => { button.textContent = text; };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(button.dataset.copy).then(() => said("Copied"), () => said("Selected: press Ctrl+C"));
      } else {
        said("Selected: press Ctrl+C");
      }
    });
  }

  const live = document.getElementById("live");
  const list = document.getElementById("events");
  if (!live || !list || !window.EventSource) return;
  const source = new EventSource(live.dataset.stream);
  const status = document.getElementById("status");
  source.addEventListener("row", (e) => {
    list.insertAdjacentHTML("beforeend", e.data);
    // A call answered (here, in another tab or through the API) loses
    // the forms that would answer it again.
    const answers = list.lastElementChild.dataset.answers;
    if (answers) {
      for (const div of list.querySelectorAll(".answer")) {
        if (div.dataset.for === answers) div.remove();
      }
    }
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
