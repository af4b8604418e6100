// The ranking screen (templates/annotation/_ranking.html). Without this file the form already works: a place per
// output, or best and worst radio buttons. This adds, where the focus is:
// - ranking: drag an output by its handle (SortableJS, mouse and touch), the ↑ / ↓ buttons, Alt+↑ / Alt+↓ on a
//   focused output, and a digit on a focused output to give it that place. The list on screen and the places stay
//   in step: moving an output numbers every output by its position, choosing a place moves the output there.
// - best-worst: B and W on a focused output mark it the best or the worst.
// Enter submits (static/js/rate.js); the server checks the answer against the screen it showed.
(function () {
  "use strict";

  function items(list) { return Array.prototype.slice.call(list.querySelectorAll(":scope > .rank-item")); }
  function placeOf(item) { return item.querySelector("select[data-place]"); }

  // every output numbered by its position on screen: what the rater sees is what is sent
  function numberAll(list) {
    items(list).forEach(function (item, index) { placeOf(item).value = String(index + 1); });
  }

  function say(list, item) {
    const status = list.parentElement.querySelector("[data-ranking-status]");
    if (!status) return;
    const title = item.querySelector("h3");
    status.textContent = (title ? title.textContent : "") + ": " + placeOf(item).value;
  }

  function move(list, item, to) {
    const all = items(list);
    to = Math.max(0, Math.min(all.length - 1, to));
    const from = all.indexOf(item);
    if (from === to) { numberAll(list); return; }
    const reference = to > from ? all[to].nextSibling : all[to];
    list.insertBefore(item, reference);
    numberAll(list);
    say(list, item);
  }

  function setUp(root) {
    const lists = root.querySelectorAll ? root.querySelectorAll("ol[data-ranking='rank']") : [];
    Array.prototype.forEach.call(lists, function (list) {
      if (list.dataset.ready) return;
      list.dataset.ready = "1";
      // a refused answer shown again with its places: the list in that order, so the next move keeps them
      const given = items(list).map(function (item) { return Number(placeOf(item).value) || Infinity; });
      if (given.some(isFinite)) {
        items(list)
          .map(function (item, index) { return [given[index], index, item]; })
          .sort(function (x, y) { return x[0] - y[0] || x[1] - y[1]; })
          .forEach(function (entry) { list.appendChild(entry[2]); });
      }
      const status = document.createElement("p");
      status.className = "visually-hidden";
      status.setAttribute("aria-live", "polite");
      status.setAttribute("data-ranking-status", "");
      list.parentElement.insertBefore(status, list.nextSibling);
      if (window.Sortable) {
        window.Sortable.create(list, {
          handle: ".drag-handle",
          draggable: ".rank-item",
          animation: 120,
          onEnd: function (event) { numberAll(list); say(list, event.item); },
        });
      }
      list.addEventListener("click", function (event) {
        const button = event.target.closest("button[data-move]");
        if (!button) return;
        const item = button.closest(".rank-item");
        move(list, item, items(list).indexOf(item) + Number(button.dataset.move));
        button.focus();
      });
      list.addEventListener("change", function (event) {
        const select = event.target.closest("select[data-place]");
        if (!select || !select.value) return;
        move(list, select.closest(".rank-item"), Number(select.value) - 1);
        select.focus();
      });
    });
  }

  document.addEventListener("keydown", function (event) {
    const item = event.target && event.target.closest ? event.target.closest(".rank-item") : null;
    if (!item || event.ctrlKey || event.metaKey) return;
    const list = item.parentElement;
    if (list.dataset.ranking === "rank") {
      if (event.altKey && (event.key === "ArrowUp" || event.key === "ArrowDown")) {
        event.preventDefault();
        move(list, item, items(list).indexOf(item) + (event.key === "ArrowUp" ? -1 : 1));
        item.focus();
        return;
      }
      // a digit on the output (not in its place list, which reads digits itself) gives it that place
      const digit = event.code && event.code.startsWith("Digit") ? Number(event.code.slice(5)) : NaN;
      if (!event.altKey && !event.shiftKey && digit >= 1 && digit <= items(list).length &&
          event.target.tagName !== "SELECT") {
        event.preventDefault();
        move(list, item, digit - 1);
        item.focus();
      }
      return;
    }
    if (event.altKey || event.shiftKey) return;
    const pick = { b: "best", w: "worst" }[event.key.toLowerCase()];
    if (!pick) return;
    const radio = item.querySelector("input[data-pick='" + pick + "']");
    if (radio) { event.preventDefault(); radio.checked = true; }
  });

  if (window.htmx) window.htmx.onLoad(setUp);
  else document.addEventListener("DOMContentLoaded", function () { setUp(document); });
})();
