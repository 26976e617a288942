() => {
  // The review console's keyboard shortcuts (ui/review.py; Gradio has none of its own):
  // keys click the buttons by id. Plain keys only while no text field has the focus; Esc
  // leaves the editor. __REVIEW_KEYS__ is replaced by the key maps, as JSON.
  if (window.__reviewKeys) return;
  window.__reviewKeys = true;
  const {plain: PLAIN, alt: ALT, ctrl: CTRL, step: STEP, fields: FIELDS,
         fieldsSave: FIELDS_SAVE} = __REVIEW_KEYS__;
  let zoom = 1;
  window.reviewZoom = (factor) => {
    zoom = factor === 0 ? 1 : Math.min(8, Math.max(0.25, zoom * factor));
    const el = document.getElementById("review-image");
    if (el) el.style.setProperty("--page-zoom", String(zoom));
  };
  const typing = (t) => t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" ||
                              t.tagName === "SELECT" || t.isContentEditable);
  document.addEventListener("keydown", (e) => {
    if (e.isComposing) return;
    let id = null;
    if ((e.ctrlKey || e.metaKey) && !e.altKey && !e.shiftKey) id = CTRL[e.key.toLowerCase()];
    else if (e.altKey && !e.ctrlKey && !e.metaKey) id = ALT[e.code];
    else if (!e.ctrlKey && !e.metaKey && !e.altKey) {
      if (typing(e.target)) {
        if (e.key === "Escape") e.target.blur();
        return;
      }
      id = PLAIN[e.key.length === 1 ? e.key.toLowerCase() : e.key];
    }
    // in a key field, "save" saves the fields, never the page's text
    if (id === "review-save" && e.target.closest && e.target.closest("#" + FIELDS)) {
      id = FIELDS_SAVE;
    }
    if (!id) return;
    e.preventDefault();
    e.stopPropagation();
    if (e.repeat) return;  // a held key acts once, never on the next page unseen
    if (id === "review-zoom-in") return window.reviewZoom(STEP);
    if (id === "review-zoom-out") return window.reviewZoom(1 / STEP);
    if (id === "review-zoom-fit") return window.reviewZoom(0);
    if (id === "review-editor") {
      const area = document.querySelector("#review-editor textarea");
      if (area) area.focus();
      return;
    }
    const button = document.getElementById(id);
    if (button && !button.disabled) button.click();
  }, true);
}
