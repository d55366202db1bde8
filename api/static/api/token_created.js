// The token field selects its whole value on focus, ready to copy (no inline handler: the
// Content-Security-Policy allows scripts from static files only).
document.addEventListener("focusin", (event) => {
  if (event.target.id === "api-token") {
    event.target.select();
  }
});
