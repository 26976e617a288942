// The documents list (ui/listing.py), run by its gr.HTML component with `element`,
// `trigger` and `watch`. A click on a name opens that document at the page a search
// found ("open"); the checkboxes choose documents for the bulk actions ("pick", with
// every chosen id). The choice is kept here, so a refresh of the list keeps it; the
// list of another query (a search, a filter, the pager) starts a new one.
const picked = new Set();
let query = null; // the data-query of the list the choice was made in
const boxes = () => element.querySelectorAll("input[data-pick]");
const send = () => trigger("pick", { documents: [...picked] });
const choose = (box, on) => {
  box.checked = on;
  if (on) picked.add(box.dataset.pick);
  else picked.delete(box.dataset.pick);
};
// A redraw keeps the boxes' elements, and with them whether they look ticked: the box
// over the list is set from the rows, never left as it was.
const tickAll = () => {
  const all = element.querySelector("input[data-pick-all]");
  if (all) all.checked = boxes().length > 0 && [...boxes()].every((box) => box.checked);
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
  tickAll();
  send();
});

// after each redraw: tick what is chosen, and forget what the list no longer shows (all
// of it, when the list answers another query)
watch("value", () => {
  const listed = element.querySelector("[data-query]")?.dataset.query ?? null;
  const shown = new Set([...boxes()].map((box) => box.dataset.pick));
  const gone = [...picked].filter((id) => listed !== query || !shown.has(id));
  query = listed;
  gone.forEach((id) => picked.delete(id));
  boxes().forEach((box) => { box.checked = picked.has(box.dataset.pick); });
  tickAll();
  if (gone.length) send();
});
