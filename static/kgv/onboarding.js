// Onboarding a KG (templates/verifier/onboard.html, onboarding.html). The form uploads its file with XMLHttpRequest
// so that the upload's progress shows; the server answers JSON: where the onboarding is followed, or why the file was
// refused (then shown as messages, nothing kept). The onboarding's page polls its state and redraws the stage and the
// progress bar; at the end it is loaded again to show what was reached.
(function () {
  "use strict";

  function showErrors(lines) {
    const box = document.getElementById("onboard-messages");
    const list = document.createElement("ul");
    list.className = "messages";
    list.setAttribute("role", "alert");
    lines.forEach((line) => {
      const item = document.createElement("li");
      item.className = "error";
      item.textContent = line;
      list.appendChild(item);
    });
    box.replaceChildren(list);
  }

  function upload(form) {
    const status = document.getElementById("upload-status");
    const bar = document.getElementById("upload-progress");
    const text = document.getElementById("upload-text");
    const button = document.getElementById("onboard-button");
    const file = form.querySelector("input[type=file]").files[0];
    const limit = Number(form.dataset.maxBytes || 0);
    if (file && limit && file.size > limit) {
      showErrors([`Nothing onboarded: ${file.name} is larger than the ${Math.floor(limit / 1048576)} MB the server accepts.`]);
      return;
    }
    const request = new XMLHttpRequest();
    request.open("POST", form.action);
    request.setRequestHeader("Accept", "application/json");
    request.upload.addEventListener("progress", (event) => {
      if (!event.lengthComputable) return;
      const percent = Math.round((100 * event.loaded) / event.total);
      bar.value = percent;
      bar.textContent = `${percent}%`;
      text.textContent = `Uploading: ${percent}% of ${(event.total / 1024).toFixed(0)} KB`;
    });
    request.upload.addEventListener("load", () => {
      bar.value = 100;
      text.textContent = "Uploaded; checking the file…";
    });
    request.addEventListener("load", () => {
      let answer = null;
      try {
        answer = JSON.parse(request.responseText);
      } catch (error) {
        answer = null;
      }
      if (request.status === 201 && answer && answer.url) {
        text.textContent = "Checked; the training workers take it from here.";
        window.location.assign(answer.url);
        return;
      }
      status.hidden = true;
      button.disabled = false;
      showErrors(answer && answer.errors ? answer.errors : [`Nothing onboarded: ${request.responseText || request.statusText}`]);
    });
    request.addEventListener("error", () => {
      status.hidden = true;
      button.disabled = false;
      showErrors(["Nothing onboarded: the upload was interrupted (the server is unreachable). Try again."]);
    });
    status.hidden = false;
    button.disabled = true;
    bar.value = 0;
    text.textContent = "Uploading…";
    request.send(new FormData(form));
  }

  const form = document.getElementById("onboard-form");
  if (form) {
    form.addEventListener("submit", (event) => {
      if (!form.reportValidity()) return;
      event.preventDefault();
      upload(form);
    });
  }

  const live = document.getElementById("onboarding-live");
  if (live && window.KGVPoll) {
    window.KGVPoll(live.dataset.stateUrl, (state) => {
      document.getElementById("onboarding-stage").textContent = state.stage || "waiting for a training worker";
      document.getElementById("onboarding-percent").textContent = String(state.percent);
      const bar = document.getElementById("onboarding-progress");
      bar.value = state.percent;
      bar.textContent = `${state.percent}%`;
      document.getElementById("onboarding-status").textContent = state.status_label;
      if (!state.done) return false;
      window.location.reload();
      return true;
    }, Number(live.dataset.pollMs || 2000));
  }
})();
