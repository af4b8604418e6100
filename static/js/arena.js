// An arena's pages: Ctrl+Enter sends the prompt (or the follow-up) from its box, a starter goes into the box, and
// each reply still being written streams into its pane (an EventSource on data-stream: "text" is the whole reply so
// far, "delta" words to add, then "done" or "failed"). Once every stream of the page has ended, the battle is
// fetched again: the server says what comes next (the vote, a failed model's new battle). The vote's own keys are
// static/js/rate.js's, as on the rating page. The pages work without this file (a form posts, a link waits).
(function () {
  "use strict";

  // Ctrl+Enter (Cmd+Enter) in a form marked data-ctrl-enter sends that form, before rate.js (which would send the
  // vote) sees the key: the capture phase runs first.
  document.addEventListener("keydown", function (event) {
    if (!(event.ctrlKey || event.metaKey) || event.key !== "Enter") return;
    const form = event.target && event.target.closest ? event.target.closest("form[data-ctrl-enter]") : null;
    if (!form) return;
    event.preventDefault();
    event.stopPropagation();
    form.requestSubmit();
  }, true);

  // A starter goes into the prompt box (to send as it is, or to change first).
  document.addEventListener("click", function (event) {
    const starter = event.target.closest ? event.target.closest("button[data-starter]") : null;
    const box = document.getElementById("id_prompt");
    if (!starter || !box) return;
    event.preventDefault();
    box.value = starter.dataset.starter;
    box.focus();
  });

  const open = [];

  function stream(pane) {
    const source = new EventSource(pane.dataset.stream);
    let ended = false;
    open.push(source);
    function end() {
      if (ended) return;
      ended = true;
      source.close();
      pane.removeAttribute("aria-busy");
      if (open.every(function (s) { return s.readyState === EventSource.CLOSED; })) refresh();
    }
    source.addEventListener("text", function (e) { pane.textContent = JSON.parse(e.data); });
    source.addEventListener("delta", function (e) { pane.append(document.createTextNode(JSON.parse(e.data))); });
    source.addEventListener("done", end);
    source.addEventListener("failed", end);
    // on a dropped connection the browser reconnects by itself (the server's "retry"), and the stream starts again
    // from the whole text so far; an answer it cannot reconnect after (a 404, a 204, another type) closes the
    // source for good: the pane is ended and the page asks the server what comes next
    source.addEventListener("error", function () {
      if (source.readyState === EventSource.CLOSED) end();
    });
  }

  function refresh() {
    const battle = document.getElementById("battle");
    if (!battle || !window.htmx) { window.location.reload(); return; }
    window.htmx.ajax("GET", battle.dataset.battleUrl, { target: "#battle", swap: "outerHTML" });
  }

  function start() {
    open.length = 0;
    document.querySelectorAll("[data-stream]").forEach(stream);
  }

  function focusFirst() {
    const first = document.querySelector("#battle [autofocus]");
    if (first) first.focus();
  }

  document.addEventListener("htmx:afterSwap", function () { start(); focusFirst(); });
  start();
})();
