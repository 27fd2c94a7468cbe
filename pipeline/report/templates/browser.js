(function () {
  "use strict";
  var search = document.getElementById("episode-search");
  var family = document.getElementById("episode-family");
  var corpus = document.getElementById("episode-corpus");
  var count = document.getElementById("episode-count");
  var items = Array.prototype.slice.call(document.querySelectorAll("details.episode"));
  function apply() {
    var text = search.value.trim().toLowerCase();
    var shown = 0;
    items.forEach(function (el) {
      var match = (!text || el.dataset.id.toLowerCase().indexOf(text) >= 0 || el.dataset.family.toLowerCase().indexOf(text) >= 0)
        && (!family.value || el.dataset.family === family.value) && (!corpus.value || el.dataset.corpus === corpus.value);
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
      search.value = ""; family.value = ""; corpus.value = "";
      apply();
      target.open = true;
      target.scrollIntoView();
    }
  }
  search.addEventListener("input", apply);
  family.addEventListener("change", apply);
  corpus.addEventListener("change", apply);
  window.addEventListener("hashchange", openFromHash);
  window.addEventListener("resize", keepBelowBar);
  keepBelowBar();
  apply();
  openFromHash();
}());
