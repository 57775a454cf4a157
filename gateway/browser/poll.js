// One reading of a chat page for the browser backend: how many answers,
// the last one's text, and which signals are visible. s holds CSS
// selectors; an empty or invalid one matches nothing here (count.js
// reports invalid ones at start-up).
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
  const answers = all(s.answer);
  return {
    answers: answers.length,
    text: text(answers[answers.length - 1]),
    generating: all(s.generating).some(visible),
    prompt: all(s.prompt).some(visible),
    login: all(s.login).some(visible),
    banner: all(s.banner).filter(visible).map(text).join('\n'),
  };
}
