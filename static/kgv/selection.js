// Ticking the rows of a table (the queue, the memory bank): the header box ticks every row of the page, a
// counter says how many are ticked, and the buttons that act on them (.needs-selection) are enabled only when
// some are; such a button with data-confirm asks first, naming the count ({n}). Each change is announced as a
// "kgv:selection" event on the document, with the count as detail.
(function () {
  "use strict";

  const selectAll = document.getElementById("select-all");
  const counter = document.getElementById("selected-count");

  function rowChecks() {
    return Array.from(document.querySelectorAll("input.row-check"));
  }

  function refresh() {
    const checks = rowChecks();
    const ticked = checks.filter((box) => box.checked).length;
    if (counter) counter.textContent = ticked ? `${ticked} selected` : "None selected";
    if (selectAll) {
      selectAll.checked = ticked > 0 && ticked === checks.length;
      selectAll.indeterminate = ticked > 0 && ticked < checks.length;
    }
    document.querySelectorAll("button.needs-selection").forEach((button) => { button.disabled = ticked === 0; });
    checks.forEach((box) => box.closest("tr").classList.toggle("ticked", box.checked));
    document.dispatchEvent(new CustomEvent("kgv:selection", { detail: { ticked } }));
  }

  if (selectAll) {
    selectAll.addEventListener("change", () => {
      rowChecks().forEach((box) => { box.checked = selectAll.checked; });
      refresh();
    });
  }
  document.querySelectorAll("button[data-confirm]").forEach((button) => {
    button.addEventListener("click", (event) => {
      const ticked = rowChecks().filter((box) => box.checked).length;
      if (!window.confirm(button.dataset.confirm.replace("{n}", ticked))) event.preventDefault();
    });
  });
  document.addEventListener("change", (event) => {
    if (event.target.classList && event.target.classList.contains("row-check")) refresh();
  });
  refresh();
})();
