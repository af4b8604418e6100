// Keyboard shortcuts and client-side timing for the rating page. The page works without this file:
// it only adds shortcuts (shown on screen) and the browser-measured time on task.
(function () {
  "use strict";
  let shownAt = performance.now();
  // the page's words for what this file names, in the raters' language (data-* on its <script> tag)
  const words = (document.currentScript && document.currentScript.dataset) || {};

  function form() { return document.getElementById("rating-form"); }

  // Each option carries the key that selects it (data-key, and data-alt-key for an arrow), written by the
  // study's elicitation mode on the server: a radio button is chosen, a check box toggled. Shift+digit
  // keys are written "shift-<digit>".
  function optionFor(f, event) {
    const digit = event.code && event.code.startsWith("Digit") ? event.code.slice(5) : null;
    if (event.shiftKey) {
      return digit ? f.querySelector('input[data-key="shift-' + digit + '"]') : null;
    }
    const key = CSS.escape(event.key);
    return f.querySelector('input[data-key="' + key + '"], input[data-alt-key="' + key + '"]');
  }

  document.addEventListener("keydown", function (event) {
    const f = form();
    // Ctrl+Enter (Cmd+Enter) submits from anywhere, also from a comment or a rationale box, where Enter is a new line
    if ((event.ctrlKey || event.metaKey) && event.key === "Enter") {
      const answers = document.getElementById("rating-form");
      if (answers) {
        event.preventDefault();
        if (window.htmx) window.htmx.process(answers);
        answers.requestSubmit();
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (!f) {
      // The completion (or expired) page: Enter continues to the next assignment where one is offered.
      const next = document.querySelector("button[data-enter]");
      if (next && event.key === "Enter" && event.target === document.body) { event.preventDefault(); next.click(); }
      return;
    }
    const target = event.target;
    if (target && (target.tagName === "TEXTAREA" || (target.tagName === "INPUT" && target.type === "text"))) return;
    if (event.key === "Enter") {
      event.preventDefault();
      // A form swapped in a moment ago may not be wired up by htmx yet; make sure it is, so a fast
      // rater's Enter goes through htmx rather than a full page post.
      if (window.htmx) window.htmx.process(f);
      f.requestSubmit();
      return;
    }
    const option = optionFor(f, event);
    if (!option) return;
    event.preventDefault();
    if (option.type === "checkbox") {
      option.checked = !option.checked;
    } else {
      option.checked = true;
      option.focus();
    }
  });

  document.addEventListener("submit", function (event) {
    const f = event.target;
    if (f.id !== "rating-form") return;
    const timing = f.querySelector('input[name="client_ms"]');  // absent in the researcher's preview
    if (timing) timing.value = String(Math.round(performance.now() - shownAt));
  }, true);

  // On a phone's screen the comment box starts closed behind its "Add a comment" summary, so the answer bar
  // stays small; the server sends it open (wide screens, and pages without this script).
  const narrow = window.matchMedia("(max-width: 760px)");
  function fitComment() {
    if (!narrow.matches) return;
    document.querySelectorAll("details.comment[open]").forEach(function (d) {
      const box = d.querySelector("textarea");
      if (!box || !box.value) d.open = false;  // never hide a comment already typed
    });
  }
  fitComment();

  document.addEventListener("htmx:afterSwap", function () {
    shownAt = performance.now();
    window.scrollTo(0, 0);
    fitComment();
    layout();
  });

  // Long outputs: a cue on each output that goes on below the answer bar, and code blocks or tables that
  // scroll sideways reachable from the keyboard.
  function layout() {
    const bar = form();
    const limit = bar ? bar.getBoundingClientRect().top : window.innerHeight;
    // the cue sits just above the sticky answer bar (CSSOM, not a style attribute: the CSP allows it)
    document.documentElement.style.setProperty("--answer-bar-height", (bar ? bar.offsetHeight : 0) + "px");
    document.querySelectorAll(".rating .output-box").forEach(function (box) {
      box.classList.toggle("continues", box.getBoundingClientRect().bottom > limit + 4);
    });
    document.querySelectorAll(".rendered pre, .rendered table").forEach(function (el) {
      if (el.scrollWidth > el.clientWidth && !el.hasAttribute("tabindex")) {
        el.setAttribute("tabindex", "0");
        el.setAttribute("aria-label", el.tagName === "PRE" ? (words.codeLabel || "Code (scrolls sideways)")
          : (words.tableLabel || "Table (scrolls sideways)"));
      }
    });
  }
  window.addEventListener("scroll", layout, { passive: true });
  window.addEventListener("resize", layout);
  document.addEventListener("toggle", layout, true);  // the comment box opened or closed: the bar's height changed
  layout();

  // Prolific: send the finished worker back with their completion code (the link works without this).
  function autoReturn() {
    const link = document.querySelector("a[data-auto-return]");
    if (link) window.setTimeout(function () { window.top.location.href = link.href; }, 1500);
  }
  document.addEventListener("htmx:afterSwap", autoReturn);
  autoReturn();

  document.documentElement.dataset.shortcuts = "on";  // lets tests (and CSS) know the keys are live
})();
