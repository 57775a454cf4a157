// One reading of a chat page for the browser backend: how many answers,
// the last one's text, and which signals are visible. s holds CSS
// selectors; an empty or invalid one matches nothing here (count.js
// reports invalid ones at start-up). s.how / s.attr say how the answer is
// read (innerText, textContent, attribute).
(s) => {
  const visible = (el) => {
    if (!el || !el.isConnected) return false;
    const st = getComputedStyle(el);
    if (st.display === 'none' || st.visibility === 'hidden') return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  const all = (sel) => {
    if (!sel) return [];
    try { return Array.from(document.querySelectorAll(sel)); } catch (e) { return []; }
  };
  const text = (el) => (el ? (el.innerText || el.textContent || '') : '');
  const read = (el) => {
    if (!el) return '';
    if (s.how === 'textContent') return el.textContent || '';
    if (s.how === 'attribute') return el.getAttribute(s.attr) || '';
    return text(el);
  };
  const answers = all(s.answer);
  const last = answers[answers.length - 1];
  // Done: a visible completion signal inside the last answer or after it
  // in document order (the toolbar under it); earlier answers' toolbars
  // come before it.
  const done = !!last && all(s.complete).some((el) => visible(el) &&
    (last.contains(el) || (last.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING) !== 0));
  return {
    answers: answers.length,
    text: read(last),
    generating: all(s.generating).some(visible),
    prompt: all(s.prompt).some(visible),
    login: all(s.login).some(visible),
    banner: all(s.banner).filter(visible).map(text).join('\n'),
    done: done,
    gone: all(s.gone).some(visible),
  };
}
