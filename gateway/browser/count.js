// How many elements each selector list matches (the first selector of the
// list that matches anything); -1 when a selector of the list is not valid
// CSS. Used by the browser backend's start-up check and fano profile check.
(sels) => {
  const out = {};
  for (const [key, list] of Object.entries(sels)) {
    let n = 0;
    for (const sel of list) {
      let c;
      try { c = document.querySelectorAll(sel).length; } catch (e) { n = -1; break; }
      if (n === 0) n = c;
    }
    out[key] = n;
  }
  return out;
}
