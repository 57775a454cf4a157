// Reads the last answer through the site's copy button (answer_text
// copy:<selector>): the page's clipboard writes are caught in the page
// (the desktop's clipboard is not touched), the copy button in or after
// the last answer is clicked, and what it wrote is returned; null if
// there is no such button or it wrote nothing within 2 s.
async (s) => {
  const all = (sel) => { try { return Array.from(document.querySelectorAll(sel)); } catch (e) { return []; } };
  // s.answer is a selector list: the first selector that matches anything.
  let answers = [];
  for (const sel of s.answer || []) { answers = all(sel); if (answers.length) break; }
  const last = answers[answers.length - 1];
  if (!last) return null;
  const buttons = all(s.button).filter((el) => last.contains(el) ||
    (last.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING) !== 0);
  if (buttons.length === 0) return null;
  let copied = null;
  const clip = navigator.clipboard;
  const saved = clip ? { writeText: clip.writeText, write: clip.write } : null;
  const onCopy = (e) => { copied = (e.clipboardData && e.clipboardData.getData('text/plain')) || copied; };
  try {
    if (clip) {
      clip.writeText = async (t) => { copied = String(t); };
      clip.write = async (items) => {
        for (const it of items) {
          if (it.types.includes('text/plain')) { copied = await (await it.getType('text/plain')).text(); }
        }
      };
    }
    document.addEventListener('copy', onCopy, true);
    buttons[0].click();
    const until = Date.now() + 2000;
    while (copied === null && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    return copied;
  } finally {
    document.removeEventListener('copy', onCopy, true);
    if (clip && saved) { clip.writeText = saved.writeText; clip.write = saved.write; }
  }
}
