// Rendered text that scrolls sideways -- a wide code block or table in an input, a turn or an output -- reachable
// from the keyboard on every page (tabindex and a name, as axe's scrollable-region-focusable asks), whenever the
// layout changes: load, resize, a toggle opened, an htmx swap. The names are the page's words, in its language
// (data-* on this <script> tag). No inline script: the CSP forbids it.
(function () {
  "use strict";
  const words = (document.currentScript && document.currentScript.dataset) || {};
  function reachable() {
    document.querySelectorAll(".rendered pre, .rendered table").forEach(function (el) {
      if (el.scrollWidth > el.clientWidth && !el.hasAttribute("tabindex")) {
        el.setAttribute("tabindex", "0");
        el.setAttribute("aria-label", el.tagName === "PRE" ? (words.codeLabel || "Code (scrolls sideways)")
          : (words.tableLabel || "Table (scrolls sideways)"));
      }
    });
  }
  window.addEventListener("resize", reachable);
  document.addEventListener("toggle", reachable, true);
  document.addEventListener("htmx:afterSwap", reachable);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", reachable);
  else reachable();
})();
