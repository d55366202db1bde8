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

// Keyboard shortcuts (listed on the #shortcuts-help dialog, which "?" opens): j and k move
// between the rows of a list (focusing the row's first link, so Enter opens it), o opens
// the row, / goes to the runs search, g then a, r or w goes to Attention, Runs or Workers.
// Keys typed into a field, or with a modifier, are the field's and the browser's.
// They can be turned off (WCAG 2.1.4: a key pressed by mistake, or a word a speech-input
// user says, would otherwise act): the checkbox in the help dialog, remembered in this
// browser for the person signed in (their name is on <body data-person>).
const shortcutsKey = () => `console.shortcuts-off:${document.body.dataset.person || ""}`;

let shortcutsOff = false;

function showShortcutsState() {
  const toggle = document.querySelector("[data-shortcuts-toggle]");
  if (toggle) toggle.checked = !shortcutsOff;
  const hint = document.querySelector(".shortcuts-hint");
  if (hint) {
    if (shortcutsOff) hint.removeAttribute("aria-keyshortcuts");
    else hint.setAttribute("aria-keyshortcuts", "?");
  }
}

document.addEventListener("DOMContentLoaded", () => {
  try {
    shortcutsOff = window.localStorage.getItem(shortcutsKey()) === "1";
  } catch (error) {
    shortcutsOff = false;  // storage refused (a browser's policy): the default
  }
  showShortcutsState();
});
document.addEventListener("change", (event) => {
  if (!event.target.matches("[data-shortcuts-toggle]")) return;
  shortcutsOff = !event.target.checked;
  try {
    if (shortcutsOff) window.localStorage.setItem(shortcutsKey(), "1");
    else window.localStorage.removeItem(shortcutsKey());
  } catch (error) {
    // Not remembered: the keys follow the box on this page still.
  }
  showShortcutsState();
});

let pendingG = false;
document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  if (shortcutsOff) return;
  const target = event.target;
  if (target.closest("input, textarea, select, [contenteditable]")) return;
  const help = document.getElementById("shortcuts-help");
  if (!help || (document.querySelector("dialog[open]") && event.key !== "?")) return;
  const urls = document.body.dataset;
  if (pendingG) {
    pendingG = false;
    const goTo = {a: urls.attentionUrl, r: urls.runsUrl, w: urls.workersUrl}[event.key];
    if (goTo) {
      event.preventDefault();
      window.location.assign(goTo);
    }
    return;
  }
  const rows = Array.from(document.querySelectorAll("tr[data-href]"));
  const current = rows.findIndex((row) => row.classList.contains("current"));
  const move = (index) => {
    if (!rows.length) return;
    const next = rows[Math.max(0, Math.min(rows.length - 1, index))];
    rows.forEach((row) => row.classList.remove("current"));
    next.classList.add("current");
    (next.querySelector("a") || next).focus();
  };
  switch (event.key) {
    case "j": event.preventDefault(); move(current + 1); break;
    case "k": event.preventDefault(); move(current < 0 ? 0 : current - 1); break;
    case "o":
      if (current >= 0) {
        event.preventDefault();
        window.location.assign(rows[current].dataset.href);
      }
      break;
    case "/": {
      event.preventDefault();
      const search = document.getElementById("id_q");
      if (search) search.focus();
      else window.location.assign(`${urls.runsUrl}?focus=search`);
      break;
    }
    case "g": pendingG = true; break;
    case "?":
      event.preventDefault();
      if (help.open) help.close(); else help.showModal();
      break;
    default: break;
  }
});

// Arriving from "/" on another page: the search box takes the focus.
document.addEventListener("DOMContentLoaded", () => {
  if (new URLSearchParams(window.location.search).get("focus") === "search") {
    document.getElementById("id_q")?.focus();
  }
});

// The live rows of a list are swapped every few seconds: the row the keyboard is on stays
// marked across the swap.
let markedRow = null;
document.addEventListener("keyup", () => {
  markedRow = document.querySelector("tr.current")?.dataset.href || markedRow;
});
document.addEventListener("htmx:afterSettle", () => {
  if (!markedRow || document.querySelector("tr.current")) return;
  document.querySelector(`tr[data-href="${CSS.escape(markedRow)}"]`)?.classList.add("current");
});

// htmx swaps no 4xx or 5xx answer: an action the server refused (403, 404, 409) would
// otherwise do nothing visible. Say so where the person is looking (the dialog the form sat
// in, or the page), in the words of the answer's error page when it has them. Written with
// textContent only: the answer is the server's, but its text is never read as markup.
const REFUSAL_CHARS = 300;

function refusalText(xhr) {
  const status = xhr ? xhr.status : 0;
  const prefix = status ? `The server refused (${status})` : "The server could not be reached";
  let said = "";
  const body = xhr && typeof xhr.responseText === "string" ? xhr.responseText : "";
  if (body) {
    // An inert document: DOMParser runs no script and loads nothing.
    const doc = new DOMParser().parseFromString(body, "text/html");
    const part = doc.querySelector("main .card p") || doc.querySelector("main") || doc.body;
    said = (part ? part.textContent : "").replace(/\s+/g, " ").trim();
    if (said.length > REFUSAL_CHARS) said = `${said.slice(0, REFUSAL_CHARS - 1)}…`;
  }
  return said ? `${prefix}: ${said}` : `${prefix}.`;
}

// A form's field the server refused (a reason of blanks, evidence missing: answered 422
// with X-Refused-Field naming it, console.views._action_refused) is marked where it is:
// the form stays as the person left it (the dialog open, what they typed kept), the field
// is marked invalid, its error is put beside it under "<id>_error" and named by its
// aria-describedby (as templates/partials/field_errors.html does for a page's forms), and
// the field takes the focus, so a screen reader says the field, "invalid" and why.
function showFieldRefusal(event) {
  const xhr = event.detail.xhr;
  const name = xhr && xhr.status === 422 && xhr.getResponseHeader("X-Refused-Field");
  const form = event.detail.elt && event.detail.elt.closest && event.detail.elt.closest("form");
  if (!name || !form) return false;
  const field = Array.from(form.elements).find(
    (element) => element.name === name && element.type !== "hidden" && element.id);
  if (!field) return false;
  form.querySelectorAll("[data-refused]").forEach((element) => {
    element.removeAttribute("aria-invalid");
    element.removeAttribute("data-refused");
  });
  form.closest("dialog")?.querySelector(":scope > .htmx-refusal")?.remove();
  const errorId = `${field.id}_error`;
  let error = document.getElementById(errorId);
  if (!error) {
    error = document.createElement("p");
    error.id = errorId;
    error.className = "error-text field-error";
    field.after(error);
  }
  error.textContent = (xhr.responseText || "").trim() || "This field was refused.";
  field.setAttribute("aria-invalid", "true");
  field.setAttribute("data-refused", "");
  const described = (field.getAttribute("aria-describedby") || "").split(/\s+/).filter(Boolean);
  if (!described.includes(errorId)) {
    field.setAttribute("aria-describedby", [...described, errorId].join(" "));
  }
  field.focus();
  return true;
}

function showRefusal(event) {
  if (showFieldRefusal(event)) return;
  const element = event.detail.elt;
  const place = (element && element.closest && element.closest("dialog[open]"))
    || document.getElementById("main") || document.body;
  let region = place.querySelector(":scope > .htmx-refusal");
  if (!region) {
    region = document.createElement("div");
    region.className = "msg error htmx-refusal";
    region.setAttribute("role", "alert");
    place.prepend(region);
  }
  region.textContent = refusalText(event.detail.xhr);
}

document.addEventListener("htmx:responseError", showRefusal);
document.addEventListener("htmx:sendError", showRefusal);

// htmx keeps the focus across a swap only on an element with an id: the focused link of a
// row the runs list refreshes, or of a run page that changed, was swapped away with its
// part and the focus fell to the page's body, every few seconds for the list (a keyboard
// user's next Tab started again from the top, a screen reader lost its place). Before a
// swap, what had the focus inside the part is noted; after it, its counterpart in the new
// part takes the focus: the same link, the same field, else the one in the same place.
const FOCUSABLE = "a[href], button, input:not([type=hidden]), select, textarea, summary, "
  + "[tabindex]";
let focusInSwap = null;

document.addEventListener("htmx:beforeSwap", (event) => {
  const active = document.activeElement;
  const target = event.detail.target;
  focusInSwap = null;
  if (!active || active === document.body || !target || !target.contains(active)) return;
  focusInSwap = {
    part: target.id,
    tag: active.tagName,
    href: active.getAttribute("href"),
    name: active.getAttribute("name"),
    value: active.getAttribute("value"),
    index: Array.from(target.querySelectorAll(FOCUSABLE)).indexOf(active),
  };
});

function counterpart(part, was) {
  const candidates = Array.from(part.querySelectorAll(FOCUSABLE));
  const same = candidates.find((element) => element.tagName === was.tag && (
    (was.href !== null && element.getAttribute("href") === was.href)
    || (was.name !== null && element.getAttribute("name") === was.name
        && element.getAttribute("value") === was.value)));
  return same || candidates[Math.min(Math.max(was.index, 0), candidates.length - 1)];
}

// A form sent from a dialog (an action on a run) swaps the part the dialog was in: the
// focus goes to the messages that say what became of it (done, refused and why), which a
// screen reader then reads, not to whatever sat where the form's button was.
document.addEventListener("htmx:afterSwap", (event) => {
  const was = focusInSwap;
  focusInSwap = null;
  if (!was) return;
  const part = (was.part && document.getElementById(was.part)) || event.target;
  if (!(part instanceof Element) || !part.isConnected) return;
  const said = event.detail.requestConfig?.verb !== "get" && part.querySelector(".messages");
  if (said) {
    said.setAttribute("tabindex", "-1");
    said.focus();
    return;
  }
  const active = document.activeElement;
  if (active && active !== document.body && active.isConnected) return;  // kept by its id
  let next = counterpart(part, was);
  if (!next) {
    next = part;
    if (!part.hasAttribute("tabindex")) part.setAttribute("tabindex", "-1");
  }
  next.focus({preventScroll: true});
});

// A part that refreshes itself says when its state changes (a bulk job's status, a run's
// status, the number of new runs a list's "N new" bar counts), not at every swap: its
// data-state is compared across the swap, and on a change its data-said goes into the
// page's status region (#live-said, base.html), which a screen reader reads. A swapped
// part cannot be that region itself: a region put in the page anew is not followed.
let stateBeforeSwap = null;

document.addEventListener("htmx:beforeSwap", (event) => {
  const target = event.detail.target;
  stateBeforeSwap = target && target.hasAttribute("data-state") ? target.dataset.state : null;
});

document.addEventListener("htmx:afterSwap", (event) => {
  const part = event.target;
  const region = document.getElementById("live-said");
  if (!(part instanceof Element) || !region || !part.hasAttribute("data-state")) return;
  if (stateBeforeSwap !== null && part.dataset.state !== stateBeforeSwap) {
    region.textContent = part.dataset.said || "";
  }
});
