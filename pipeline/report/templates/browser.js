(function () {
  "use strict";
  var search = document.getElementById("episode-search");
  var family = document.getElementById("episode-family");
  var corpus = document.getElementById("episode-corpus");
  var outcome = document.getElementById("episode-outcome");
  var mode = document.getElementById("episode-mode");
  var agent = document.getElementById("episode-agent");
  var selects = [family, corpus, outcome, mode, agent];
  var count = document.getElementById("episode-count");
  var items = Array.prototype.slice.call(document.querySelectorAll("details.episode"));
  var runs = items.map(function (el) {  // every agent run shown in the episode, with what the run filters look at
    return Array.prototype.slice.call(el.querySelectorAll(".conversation[data-agent]")).map(function (c) {
      return { agent: c.dataset.agent, outcome: c.dataset.outcome, modes: c.dataset.modes.split(" ") };
    });
  });
  function runMatches(run) {
    return (!agent.value || run.agent === agent.value) && (!outcome.value || run.outcome === outcome.value)
      && (!mode.value || run.modes.indexOf(mode.value) >= 0);
  }
  function apply() {
    var text = search.value.trim().toLowerCase();
    var byRun = agent.value || outcome.value || mode.value;  // one run must match the agent, outcome and mode asked
    var shown = 0;
    items.forEach(function (el, index) {
      var match = (!text || el.dataset.id.toLowerCase().indexOf(text) >= 0 || el.dataset.family.toLowerCase().indexOf(text) >= 0)
        && (!family.value || el.dataset.family === family.value) && (!corpus.value || el.dataset.corpus === corpus.value)
        && (!byRun || runs[index].some(runMatches));
      el.hidden = !match;
      if (match) { shown += 1; }
    });
    count.textContent = shown + " of " + items.length + " episodes";
  }
  var bar = document.querySelector(".filters");
  function keepBelowBar() {  // anchored episodes scroll to just below the sticky filter bar, however tall it wraps
    var margin = ((bar ? bar.offsetHeight : 0) + 8) + "px";
    items.forEach(function (el) { el.style.scrollMarginTop = margin; });
  }
  function openFromHash() {
    var id;
    try { id = decodeURIComponent(location.hash.slice(1)); } catch (e) { return; }  // a malformed hash names nothing
    var target = id ? document.getElementById(id) : null;
    if (target && target.classList.contains("episode")) {
      search.value = "";
      selects.forEach(function (select) { select.value = ""; });
      apply();
      target.open = true;
      target.scrollIntoView();
    }
  }
  search.addEventListener("input", apply);
  selects.forEach(function (select) { select.addEventListener("change", apply); });
  window.addEventListener("hashchange", openFromHash);
  window.addEventListener("resize", keepBelowBar);
  keepBelowBar();
  apply();
  openFromHash();
}());
