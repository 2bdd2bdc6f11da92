// A form with data-confirm asks before it is sent (the question is the attribute's text); cancelling sends nothing.
// Kept out of the markup: the Content-Security-Policy runs no inline event handler.
document.querySelectorAll("form[data-confirm]").forEach((form) => {
  form.addEventListener("submit", (event) => {
    if (!window.confirm(form.dataset.confirm)) event.preventDefault();
  });
});
