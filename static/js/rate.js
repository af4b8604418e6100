// Keyboard shortcuts and client-side timing for the rating page. The page works without this file:
// it only adds shortcuts (shown on screen) and the browser-measured time on task.
(function () {
  "use strict";
  let shownAt = performance.now();

  function form() { return document.getElementById("rating-form"); }

  // Each option carries the key that selects it (data-key, and data-alt-key for an arrow), written on the server:
  // the main question's digits and arrows (its elicitation mode) and each further question's own letters
  // (annotation/questions.py). A radio button is chosen, a check box toggled. Shift+digit keys are written
  // "shift-<digit>"; a letter is matched whatever the Caps Lock.
  function optionFor(f, event) {
    const digit = event.code && event.code.startsWith("Digit") ? event.code.slice(5) : null;
    if (event.shiftKey) {
      return digit ? f.querySelector('input[data-key="shift-' + digit + '"]') : null;
    }
    const key = CSS.escape(event.key.length === 1 ? event.key.toLowerCase() : event.key);
    return f.querySelector('input[data-key="' + key + '"], input[data-alt-key="' + key + '"]');
  }

  // The further question an element is in, or null (the main question, the comment, the buttons).
  function questionOf(element) {
    return element && element.closest ? element.closest(".further-questions fieldset") : null;
  }

  // Where Enter does what the focused element does (a button presses, a link follows, a summary opens, a list
  // picks) rather than submitting the answer.
  const OWN_ENTER = ["BUTTON", "A", "SUMMARY", "SELECT"];

  document.addEventListener("keydown", function (event) {
    const f = form();
    // Ctrl+Enter (Cmd+Enter) submits from anywhere, also from a comment or a rationale box, where Enter is a new line
    if ((event.ctrlKey || event.metaKey) && event.key === "Enter") {
      if (f) {
        event.preventDefault();
        if (window.htmx) window.htmx.process(f);
        f.requestSubmit();
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
    if (target && (target.tagName === "TEXTAREA" || target.tagName === "SELECT" ||
        (target.tagName === "INPUT" && target.type === "text"))) return;
    if (event.key === "Enter") {
      if (target && OWN_ENTER.indexOf(target.tagName) >= 0) return;
      event.preventDefault();
      // A form swapped in a moment ago may not be wired up by htmx yet; make sure it is, so a fast
      // rater's Enter goes through htmx rather than a full page post. requestSubmit checks the form first:
      // the browser asks for a required answer that is missing.
      if (window.htmx) window.htmx.process(f);
      f.requestSubmit();
      return;
    }
    const option = optionFor(f, event);
    if (!option || option.disabled) return;
    // Keys act where the focus is: inside a further question the main question's digits and arrows do nothing
    // (the arrows stay the radio group's own: they move within that question). A question's own letters act
    // from anywhere, as they belong to no other question.
    const here = questionOf(target);
    const there = questionOf(option);
    if (here && there !== here && !/^[a-z]$/.test(option.dataset.key || "")) return;
    // on a region that scrolls (the instructions, a wide code block or table) the arrows scroll it
    if (event.key.startsWith("Arrow") && target && target.tagName !== "INPUT" && target.hasAttribute &&
        target.hasAttribute("tabindex")) return;
    event.preventDefault();
    if (option.type === "checkbox") {
      option.checked = !option.checked;
    } else {
      option.checked = true;
    }
    // the focus follows the answer just given, so the arrows and Space go on in that question
    option.focus();
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

  // Long outputs: a cue on each output that goes on below the answer bar (code blocks and tables that scroll
  // sideways are made reachable from the keyboard by scrollables.js, on every page).
  function layout() {
    const bar = form();
    const limit = bar ? bar.getBoundingClientRect().top : window.innerHeight;
    // the cue sits just above the sticky answer bar (CSSOM, not a style attribute: the CSP allows it)
    document.documentElement.style.setProperty("--answer-bar-height", (bar ? bar.offsetHeight : 0) + "px");
    document.querySelectorAll(".rating .output-box").forEach(function (box) {
      box.classList.toggle("continues", box.getBoundingClientRect().bottom > limit + 4);
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
