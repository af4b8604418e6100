// Copy buttons: <button data-copy="ID"> copies the value of the element with that id (a link box), or its text
// (a completion code).
// No inline script (the CSP forbids it); works without a secure context through a selection fallback.
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const box = document.getElementById(button.dataset.copy);
  if (!box) return;
  const text = (box.value ?? box.textContent).trim();
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    if (box.select) {
      box.select();
    } else {
      const range = document.createRange();
      range.selectNodeContents(box);
      window.getSelection().removeAllRanges();
      window.getSelection().addRange(range);
    }
    document.execCommand("copy");
  }
  const label = button.textContent;
  button.textContent = button.dataset.copied || "Copied";  // the page's word, in its language
  button.setAttribute("aria-live", "polite");
  setTimeout(() => { button.textContent = label; }, 1500);
});
