// The run page: live steps over a websocket, the support subgraph, and the reviewer's keyboard.
// Steps arrive as {"type": "run.step", "step": {...}} after one {"type": "run.status", "run": {...}}
// (verifier/realtime/consumers.py); a reconnect asks for the steps after the last seq this page shows.
(function () {
  "use strict";

  const KIND_LABELS = { plan: "Plan", thought: "Thought", action: "Action", observation: "Observation", verdict: "Verdict" };
  const VERDICT_LABELS = { correct: "Correct", incorrect: "Incorrect", not_enough_evidence: "Not enough evidence" };
  const STATUS_LABELS = { queued: "Queued", running: "Running", succeeded: "Succeeded", failed: "Failed", cancelled: "Cancelled" };
  const NO_RETRY_CODES = [4401, 4403, 4404];
  const BACKOFF_MS = { first: 500, max: 15000 };

  const page = document.querySelector(".run-page");
  if (!page) return;
  const $ = (id) => document.getElementById(id);

  // ---- evidence keys in step text become links to the evidence table -------------------------------
  function linkifyKeys(pre) {
    const text = pre.textContent;
    if (!/\[E\d+\]/.test(text)) return;
    pre.textContent = "";
    text.split(/(\[E\d+\])/).forEach((part) => {
      const match = /^\[(E\d+)\]$/.exec(part);
      if (!match) {
        pre.appendChild(document.createTextNode(part));
        return;
      }
      const link = document.createElement("a");
      link.className = "evidence-key";
      link.dataset.key = match[1];
      link.href = $("evidence-" + match[1]) ? "#evidence-" + match[1] : "#retrieved-" + match[1];
      link.textContent = part;
      pre.appendChild(link);
    });
  }

  // ---- steps and the timeline ---------------------------------------------------------------------
  const stepList = $("steps");
  const timeline = $("timeline");
  let lastSeq = Number(page.dataset.lastSeq || 0);

  // A step arrives rendered by the server (templates/verifier/run_step.html, as on page load): one renderer.
  function stepElement(step) {
    const holder = document.createElement("template");
    holder.innerHTML = step.html.trim();
    const item = holder.content.firstElementChild;
    item.querySelectorAll("pre.content").forEach(linkifyKeys);
    return item;
  }

  function addSegment(seq, kind, durationMs) {
    if (!timeline) return;
    const segment = document.createElement("a");
    segment.className = "segment kind-" + kind;
    segment.href = "#step-" + seq;
    segment.dataset.seq = seq;
    segment.dataset.durationMs = durationMs || 0;
    segment.title = `${seq} · ${KIND_LABELS[kind] || kind}` + (durationMs ? ` · ${durationMs} ms` : "");
    timeline.appendChild(segment);
  }

  function sizeTimeline() {
    if (!timeline) return;
    timeline.querySelectorAll(".segment").forEach((segment) => {
      // square root keeps a 40 s model call from hiding the 20 ms tool calls next to it
      segment.style.flexGrow = String(1 + Math.sqrt(Number(segment.dataset.durationMs || 0) / 100));
    });
  }

  // ---- live figures: tokens, cost, elapsed --------------------------------------------------------
  const figures = {
    prompt: Number(($("prompt-tokens") || {}).textContent || 0),
    completion: Number(($("completion-tokens") || {}).textContent || 0),
    startedAt: page.dataset.startedAt ? Date.parse(page.dataset.startedAt) : null,
    finishedAt: page.dataset.finishedAt ? Date.parse(page.dataset.finishedAt) : null,
  };

  function showTokens() {
    if ($("prompt-tokens")) $("prompt-tokens").textContent = figures.prompt;
    if ($("completion-tokens")) $("completion-tokens").textContent = figures.completion;
  }

  function showElapsed() {
    const elapsed = $("elapsed");
    if (!elapsed || figures.startedAt === null) return;
    const end = figures.finishedAt === null ? Date.now() : figures.finishedAt;
    const seconds = Math.max(0, Math.round((end - figures.startedAt) / 1000));
    elapsed.dataset.seconds = seconds;
    elapsed.textContent = seconds < 60 ? `${seconds} s` : `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
  }

  // The status line, the place in the queue and why the run waits (verifier/web/run_state.py). Once the run has
  // left the queue, its place, its reason and the "queued" message are gone, and its time counts from its start.
  function showStatus(status) {
    $("run-status").textContent = STATUS_LABELS[status] || status;
    $("run-status").dataset.status = status;
    page.dataset.status = status;
    if (status === "queued") return;
    ["queue-position", "wait-reason"].forEach((id) => $(id) && ($(id).hidden = true));
    document.querySelectorAll(".messages li.run-queued").forEach((message) => message.remove());
    if (status === "running" && !$("verdict").dataset.verdict) $("verdict").textContent = "Investigating…";
  }

  function showWaiting(state) {
    showStatus(state.status);
    if (state.started_at && figures.startedAt === null) figures.startedAt = Date.parse(state.started_at);
    if (state.status !== "queued") return;
    const place = $("queue-position");
    const reason = $("wait-reason");
    place.textContent = state.position_text;
    place.hidden = !state.position_text;
    reason.textContent = state.waiting;
    reason.hidden = !state.waiting;
  }

  function applyStatus(run) {
    showStatus(run.status);
    figures.prompt = run.prompt_tokens;
    figures.completion = run.completion_tokens;
    showTokens();
    if ($("cost")) $("cost").textContent = Number(run.cost_usd).toFixed(6);
    if (run.started_at) figures.startedAt = Date.parse(run.started_at);
    if (run.finished_at) figures.finishedAt = Date.parse(run.finished_at);
    if (run.verdict) showVerdict(run.verdict);
    if (run.finished) finish(run);  // the server says whether the run has ended (Run.is_finished)
  }

  function showVerdict(verdict) {
    const box = $("verdict");
    page.dataset.verdict = verdict;  // the verdict step takes its colour (run.css)
    box.dataset.verdict = verdict;
    box.className = "verdict verdict-" + verdict;
    box.textContent = VERDICT_LABELS[verdict] || verdict;
  }

  function finish(run) {
    if (page.dataset.state === "finished") return;
    page.dataset.state = "finished";
    showElapsed();
    ["cancel-form", "pause-toggle"].forEach((id) => $(id) && ($(id).hidden = true));
    if (!run.verdict && $("verdict").dataset.verdict === "") $("verdict").textContent = "No verdict";
    setConnection(`The run ${run.status}.`, false);
    refreshSections(run).then(loadGraph);
  }

  // The confidence and its account, the quality signals, the evidence table, the memories used and the review panel
  // are rendered by the server (templates/verifier/run_sections.html, the templates the page includes): once the run
  // has ended they are asked for again, with the page's queue, and each is swapped in by its id: no reload.
  function refreshSections(run) {
    return window.KGVPoll.get(page.dataset.sectionsUrl + window.location.search, { html: true })
      .then((sections) => window.KGVPoll.swap(sections))
      .catch(() => setConnection(`The run ${run.status}. `, true));
  }

  // ---- the stream, with pause ---------------------------------------------------------------------
  let paused = false;
  const buffered = [];

  function applyStep(step) {
    if (step.seq <= lastSeq) return; // a duplicate after a reconnect
    lastSeq = step.seq;
    page.dataset.lastSeq = lastSeq;
    const follow = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    stepList.appendChild(stepElement(step));
    addSegment(step.seq, step.kind, step.duration_ms);
    sizeTimeline();
    if ($("steps-empty")) $("steps-empty").hidden = true;
    if (follow) stepList.lastElementChild.scrollIntoView({ block: "end" });
  }

  function receiveStep(step) {
    figures.prompt += step.prompt_tokens || 0;
    figures.completion += step.completion_tokens || 0;
    showTokens();
    if (paused) {
      buffered.push(step);
      $("buffered-count").textContent = buffered.length;
      $("buffered").hidden = false;
    } else {
      applyStep(step);
    }
  }

  function setPaused(value) {
    paused = value;
    const toggle = $("pause-toggle");
    if (toggle) {
      toggle.setAttribute("aria-pressed", String(paused));
      toggle.textContent = paused ? "Resume" : "Pause";
    }
    page.dataset.paused = String(paused);
    if (!paused) {
      buffered.splice(0).forEach(applyStep);
      $("buffered").hidden = true;
    }
  }

  function setConnection(text, withReload) {
    const line = $("connection");
    if (!line) return;
    line.textContent = text;
    if (withReload) {
      const reload = document.createElement("a");
      reload.href = window.location.href.split("#")[0];
      reload.id = "reload-link";
      reload.textContent = "Reload for the evidence and the review.";
      line.appendChild(reload);
    }
  }

  let socket = null;
  let retryMs = BACKOFF_MS.first;

  function connect() {
    if (page.dataset.state !== "live" || !page.dataset.wsPath) return;
    const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
    // the steps the page shows, plus those held back by the pause: resume after the last one received
    const after = buffered.length ? buffered[buffered.length - 1].seq : lastSeq;
    socket = new WebSocket(`${scheme}//${window.location.host}${page.dataset.wsPath}?after=${after}`);
    socket.onopen = () => {
      retryMs = BACKOFF_MS.first;
      setConnection("Live.");
    };
    socket.onmessage = (event) => {
      const message = JSON.parse(event.data);
      if (message.type === "run.step") {
        const newest = buffered.length ? buffered[buffered.length - 1].seq : lastSeq;
        if (message.step.seq > newest) receiveStep(message.step);
      } else if (message.type === "run.status") {
        applyStatus(message.run);
      }
    };
    socket.onclose = (event) => {
      socket = null;
      if (page.dataset.state !== "live") return;
      if (NO_RETRY_CODES.includes(event.code)) {
        setConnection(event.code === 4404 ? "This run no longer exists." : "Not allowed to follow this run; sign in again.");
        return;
      }
      const wait = Math.min(retryMs, BACKOFF_MS.max) * (0.75 + Math.random() / 2);
      setConnection(`Connection lost; reconnecting in ${Math.round(wait / 1000)} s…`);
      retryMs = Math.min(retryMs * 2, BACKOFF_MS.max);
      window.setTimeout(connect, wait);
    };
  }

  // ---- the support subgraph -----------------------------------------------------------------------
  let graph = null;

  function loadGraph() {
    const container = $("graph");
    if (!container || !page.dataset.graphUrl) return;
    if (!window.KGVGraph) {
      $("graph-status").textContent = "The graph library did not load (static/kgv/dist/graph.js).";
      return;
    }
    fetch(page.dataset.graphUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then((response) => (response.ok ? response.json() : Promise.reject(new Error(response.statusText))))
      .then((data) => {
        if (graph) graph.cy.destroy();
        graph = window.KGVGraph.draw(container, data, (keys) => {
          const row = keys.length && $("evidence-" + keys[0]);
          if (row) row.scrollIntoView({ block: "center" });
        });
        const shown = data.cited_only ? "cited" : "retrieved so far";
        $("graph-status").textContent = `${data.nodes.length} entities, ${data.edges.length} relations (${shown}).`;
      })
      .catch((error) => {
        $("graph-status").textContent = "Could not load the subgraph: " + error.message;
      });
  }

  // ---- keyboard -----------------------------------------------------------------------------------
  function submitDecision(buttonId) {
    const button = $(buttonId);
    if (button) $("review-form").requestSubmit(button);
  }

  function go(url) {
    if (url) window.location.assign(url);
  }

  const SHORTCUTS = {
    j: () => go(page.dataset.nextUrl),
    n: () => go(page.dataset.nextUrl),
    k: () => go(page.dataset.previousUrl),
    p: () => go(page.dataset.previousUrl),
    a: () => submitDecision("review-accept"),
    e: () => submitDecision("review-nee"),
    o: () => {
      const reason = $("review-reason");
      if (!reason || !$("review-override")) return;
      reason.focus();
    },
    m: () => page.dataset.canReview === "true" && go(page.dataset.promoteUrl),
    u: () => $("undo-form")?.requestSubmit(),
    "?": () => toggleShortcuts(),
  };

  function toggleShortcuts() {
    const sheet = $("shortcuts");
    if (!sheet) return;
    if (sheet.open) sheet.close();
    else sheet.showModal();
  }

  document.addEventListener("keydown", (event) => {
    const target = event.target;
    const typing = target.closest && target.closest("input, textarea, select, [contenteditable]");
    if (typing) {
      // in the reason box, Ctrl/Cmd+Enter sends it: as an override where the reviewer may override, else a comment
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && target.id === "review-reason") {
        event.preventDefault();
        submitDecision($("review-override") ? "review-override" : "review-comment");
      } else if (event.key === "Escape") {
        target.blur();
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const action = SHORTCUTS[event.key];
    if (!action) return;
    event.preventDefault();
    action();
  });

  // ---- start --------------------------------------------------------------------------------------
  document.querySelectorAll("#steps pre.content").forEach(linkifyKeys);
  sizeTimeline();
  if ($("pause-toggle")) $("pause-toggle").addEventListener("click", () => setPaused(!paused));
  if ($("show-buffered")) $("show-buffered").addEventListener("click", () => setPaused(false));
  if ($("shortcuts-button")) $("shortcuts-button").addEventListener("click", toggleShortcuts);
  showElapsed();
  if (page.dataset.state === "live") {
    window.setInterval(() => figures.finishedAt === null && showElapsed(), 1000);
    connect();
  }
  // While the run waits, its place counts down and its reason changes: asked every few seconds until it has started
  // (the websocket says so too; whichever comes first).
  if (page.dataset.status === "queued" && page.dataset.stateUrl) {
    window.KGVPoll(page.dataset.stateUrl, (state) => {
      if (page.dataset.status !== "queued") return true;
      showWaiting(state);
      return state.status !== "queued";
    }, 3000);
  }
  if ($("graph")) loadGraph();
})();
