// The documents list (ui/listing.py), run by its gr.HTML component with `element`,
// `trigger` and `watch`. A click on a name opens that document at the page a search
// found ("open"); the checkboxes choose documents for the bulk actions ("pick", with
// every chosen id). The choice is kept here, so a refresh of the list keeps it.
const picked = new Set();
const boxes = () => element.querySelectorAll("input[data-pick]");
const send = () => trigger("pick", { documents: [...picked] });
const choose = (box, on) => {
  box.checked = on;
  if (on) picked.add(box.dataset.pick);
  else picked.delete(box.dataset.pick);
};

element.addEventListener("click", (event) => {
  const open = event.target.closest("[data-open]");
  if (open) trigger("open", { document: open.dataset.open, page: Number(open.dataset.page) });
});

element.addEventListener("change", (event) => {
  const box = event.target;
  if (box.matches("input[data-pick-all]")) boxes().forEach((each) => choose(each, box.checked));
  else if (box.matches("input[data-pick]")) choose(box, box.checked);
  else return;
  send();
});

// after each redraw: tick what is chosen, and forget what the list no longer shows
watch("value", () => {
  const shown = new Set([...boxes()].map((box) => box.dataset.pick));
  const gone = [...picked].filter((id) => !shown.has(id));
  gone.forEach((id) => picked.delete(id));
  boxes().forEach((box) => { box.checked = picked.has(box.dataset.pick); });
  if (gone.length) send();
});
