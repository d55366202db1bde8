// The console's few behaviours, from this file only: the Content-Security-Policy allows no
// inline scripts or event-handler attributes, so templates mark elements with data-*
// attributes and the handlers here act on them (delegated, so htmx-swapped parts work too).

// <button data-opens-dialog="dialog-id"> opens that dialog; <button data-closes-dialog>
// closes the dialog it sits in.
document.addEventListener("click", (event) => {
  const opener = event.target.closest("[data-opens-dialog]");
  if (opener) {
    document.getElementById(opener.dataset.opensDialog)?.showModal();
    return;
  }
  const closer = event.target.closest("[data-closes-dialog]");
  if (closer) {
    closer.closest("dialog")?.close();
  }
});

// An element with data-pause-while-dialog-open skips its polling request while a dialog is
// open, so the form a person is filling in is not swapped away under them. (htmx's trigger
// filters would do this inline, but they need eval, which the policy forbids.)
document.addEventListener("htmx:beforeRequest", (event) => {
  const element = event.detail.elt;
  if (element.hasAttribute("data-pause-while-dialog-open")
      && document.querySelector("dialog[open]")) {
    event.preventDefault();
  }
});
