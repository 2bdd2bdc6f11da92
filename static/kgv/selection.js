// Ticking the rows of a table (the queue, the memory bank): the header box ticks every row of the page, a
// counter says how many are ticked, and the buttons that act on them (.needs-selection) are enabled only when
// some are; such a button with data-confirm asks first, naming the count ({n}). Each change is announced as a
// "kgv:selection" event on the document, with the count as detail.
//
// Where the page lists more rows than it shows (#select-matching, data-count: the view's rows, data-max: the most
// one action takes), ticking the whole page offers to tick every row of the view instead: the form's #matching
// field then says so, and the count is the view's.
(function () {
  "use strict";

  const selectAll = document.getElementById("select-all");
  const counter = document.getElementById("selected-count");
  const offer = document.getElementById("select-matching");
  const matchingField = document.getElementById("matching");
  let allMatching = false;

  function rowChecks() {
    return Array.from(document.querySelectorAll("input.row-check"));
  }

  function showOffer(pageTicked, onPage) {
    if (!offer) return;
    offer.hidden = !pageTicked;
    const inView = Number(offer.dataset.count);
    const most = Number(offer.dataset.max);
    const text = document.getElementById("select-matching-text");
    const button = document.getElementById("select-matching-button");
    if (allMatching) {
      text.textContent = `All ${inView.toLocaleString()} of this view are ticked.`;
      button.textContent = "Tick only this page";
    } else {
      text.textContent = `All ${onPage} on this page are ticked.` +
        (inView > most ? ` This view holds ${inView.toLocaleString()}; one action takes at most ${most.toLocaleString()}: narrow the filters to act on all.` : "");
      button.textContent = `Tick all ${inView.toLocaleString()} of this view`;
    }
    button.hidden = !allMatching && inView > most;
    if (matchingField) matchingField.value = allMatching ? "1" : "";
  }

  function count() {
    const checks = rowChecks();
    const ticked = checks.filter((box) => box.checked).length;
    return allMatching ? Number(offer.dataset.count) : ticked;
  }

  function refresh() {
    const checks = rowChecks();
    const ticked = checks.filter((box) => box.checked).length;
    const pageTicked = ticked > 0 && ticked === checks.length;
    if (!pageTicked) allMatching = false;
    showOffer(pageTicked, ticked);
    const n = count();
    if (counter) counter.textContent = n ? `${n.toLocaleString()} selected` : "None selected";
    if (selectAll) {
      selectAll.checked = pageTicked;
      selectAll.indeterminate = ticked > 0 && ticked < checks.length;
    }
    document.querySelectorAll("button.needs-selection").forEach((button) => { button.disabled = n === 0; });
    checks.forEach((box) => box.closest("tr").classList.toggle("ticked", box.checked));
    document.dispatchEvent(new CustomEvent("kgv:selection", { detail: { ticked: n } }));
  }

  if (selectAll) {
    selectAll.addEventListener("change", () => {
      rowChecks().forEach((box) => { box.checked = selectAll.checked; });
      refresh();
    });
  }
  if (offer) {
    document.getElementById("select-matching-button").addEventListener("click", () => {
      allMatching = !allMatching;
      refresh();
    });
  }
  document.querySelectorAll("button[data-confirm]").forEach((button) => {
    button.addEventListener("click", (event) => {
      if (!window.confirm(button.dataset.confirm.replace("{n}", count().toLocaleString()))) event.preventDefault();
    });
  });
  document.addEventListener("change", (event) => {
    if (event.target.classList && event.target.classList.contains("row-check")) refresh();
  });
  refresh();
})();
